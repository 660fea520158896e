use std::io::IsTerminal;

fn main() {
    // Colours only on a terminal that shows them (NO_COLOR, https://no-color.org, when set and
    // not empty; TERM=dumb).
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
    // The command line is read as UTF-8 text: an argument that is not is refused, naming it,
    // rather than read with its bad bytes replaced (helper t22: `--input $'\xff'` ran on "�").
    let mut args: Vec<String> = vec![];
    for (i, a) in std::env::args_os().enumerate() {
        match a.into_string() {
            Ok(s) => args.push(s),
            Err(a) => {
                eprintln!("error: argument {i} (`{}`) is not valid UTF-8: raspc reads its command line as UTF-8 text", a.to_string_lossy());
                std::process::exit(2);
            }
        }
    }
    // Signals end every command the same way: temporary files removed, exit 128 + signal.
    raspc::install_signal_handling();
    // Unlocked handles: the worker thread's progress bars lock stderr themselves.
    let code = raspc::run(args, &mut std::io::stdout(), &mut std::io::stderr(), color);
    std::process::exit(code);
}
