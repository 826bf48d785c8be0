fn main() -> std::process::ExitCode {
    prdloop::main()
}
