use super::*;
use clap::CommandFactory;

#[test]
fn clap_definition_is_valid() {
    Cli::command().debug_assert();
}

#[test]
fn durations() {
    assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
    assert_eq!(parse_duration("20m").unwrap(), Duration::from_secs(1200));
    assert!(parse_duration("soon").is_err());
    assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
    for zero in ["0", "0s", "0m", "0 h"] {
        assert!(parse_positive_duration(zero).is_err(), "{zero}");
    }
    assert_eq!(
        parse_positive_duration("1s").unwrap(),
        Duration::from_secs(1)
    );
}

#[test]
fn pai_form_without_p_gets_a_hint() {
    let args =
        |s: &str| -> Vec<std::ffi::OsString> { s.split_whitespace().map(Into::into).collect() };
    assert_eq!(
        pai_form_hint(&args("-m loop two.md")).as_deref(),
        Some(
            "`-m loop` takes the PRD with `-p`: `prdloop -m loop -p two.md`, or `prdloop run two.md`"
        )
    );
    assert_eq!(
        pai_form_hint(&args("-a 4 --mode=interactive --timeout 5m two.md")).as_deref(),
        Some(
            "`-m interactive` takes the PRD with `-p`: `prdloop -m interactive -p two.md`, or `prdloop interactive two.md`"
        )
    );
    assert!(
        pai_form_hint(&args("-m loop -a 4 two.md"))
            .unwrap()
            .contains("-p two.md")
    );
    assert_eq!(pai_form_hint(&args("-m loop -p one.md two.md")), None);
    assert_eq!(pai_form_hint(&args("-a 4 two.md")), None);
    assert_eq!(pai_form_hint(&args("-m loop")), None);
}

#[test]
fn json_runs_are_told_from_raw_arguments() {
    let args =
        |s: &str| -> Vec<std::ffi::OsString> { s.split_whitespace().map(Into::into).collect() };
    assert!(wants_json_run(&args("run PRD.md --json --timeout 0"), None));
    assert!(wants_json_run(
        &args("-m loop -p PRD.md -n -1"),
        Some("1".as_ref())
    ));
    assert!(!wants_json_run(&args("plan PRD.md --json -a 0"), None));
    assert!(!wants_json_run(
        &args("run PRD.md --timeout 0"),
        Some("false".as_ref())
    ));
}

#[test]
fn color_is_read_from_raw_arguments_for_usage_errors() {
    let args =
        |s: &str| -> Vec<std::ffi::OsString> { s.split_whitespace().map(Into::into).collect() };
    assert_eq!(
        color_asked(&args("run x --color always"), None),
        ColorArg::Always
    );
    assert_eq!(
        color_asked(&args("run --color=never x"), None),
        ColorArg::Never
    );
    assert_eq!(
        color_asked(&args("run x"), Some("always".as_ref())),
        ColorArg::Always
    );
    assert_eq!(
        color_asked(&args("run x --color never"), Some("always".as_ref())),
        ColorArg::Never
    );
    assert_eq!(color_asked(&args("run x --color"), None), ColorArg::Auto);
    assert_eq!(
        color_asked(&args("run -- --color always"), None),
        ColorArg::Auto
    );
}

#[test]
fn counts() {
    assert_eq!(parse_at_least_1("3"), Ok(3));
    assert_eq!(
        parse_at_least_1("0"),
        Err("must be at least 1, not 0".into())
    );
    assert_eq!(
        parse_at_least_1("-1"),
        Err("must be at least 1, not -1".into())
    );
    assert_eq!(parse_at_least_0("0"), Ok(0));
    assert_eq!(
        parse_at_least_0("-2"),
        Err("must be 0 or more, not -2".into())
    );
    assert_eq!(
        parse_at_least_1_u32("99999999999").unwrap_err(),
        format!("must be at most {}, not 99999999999", u32::MAX)
    );
    assert_eq!(
        parse_at_least_1("four"),
        Err("`four` is not a whole number".into())
    );
}
