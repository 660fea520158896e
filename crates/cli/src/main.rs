use std::io::IsTerminal;

fn main() {
    // Colours only on a terminal that shows them (NO_COLOR, https://no-color.org; TERM=dumb).
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none() && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
    // Unlocked handles: the worker thread's progress bars lock stderr themselves.
    let args: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    // Signals end every command the same way: temporary files removed, exit 128 + signal.
    raspc::install_signal_handling();
    let code = raspc::run(args, &mut std::io::stdout(), &mut std::io::stderr(), color);
    std::process::exit(code);
}
