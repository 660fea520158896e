use std::io::IsTerminal;

fn main() {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    // Unlocked handles: the worker thread's progress bars lock stderr themselves.
    let args: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    let code = raspc::run(args, &mut std::io::stdout(), &mut std::io::stderr(), color);
    std::process::exit(code);
}
