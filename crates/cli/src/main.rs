use std::io::IsTerminal;

fn main() {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let args: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    let code = raspc::run(args, &mut std::io::stdout().lock(), &mut std::io::stderr().lock(), color);
    std::process::exit(code);
}
