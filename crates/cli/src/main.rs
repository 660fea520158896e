use std::io::IsTerminal;

fn main() {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let args: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    // Host-level evaluation recurses over the program; give it room.
    let handle = std::thread::Builder::new().stack_size(256 << 20).spawn(move || {
        let stdout = std::io::stdout();
        let stderr = std::io::stderr();
        raspc::run(args, &mut stdout.lock(), &mut stderr.lock(), color)
    });
    let code = match handle.map(|h| h.join()) {
        Ok(Ok(code)) => code,
        _ => {
            eprintln!("error: internal error in raspc (this is a bug; please report it with the program that caused it)");
            101
        }
    };
    std::process::exit(code);
}
