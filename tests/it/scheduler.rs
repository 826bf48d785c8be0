//! The scheduler's bounds as a user meets them: `--stall N` ends a hopeless run after N
//! rounds without a pass, in both loop modes.

use crate::common::*;
use serde_json::json;

#[test]
fn one_always_failing_criterion_stops_after_stall_rounds_in_both_modes() {
    for rounds in ["continuous", "barrier"] {
        let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: never"]), json!({"*": ["fail"]}));
        let out = sb.run(&[
            "run", "PRD.md", "-n", "128", "--stall", "3", "--rounds", rounds,
        ]);
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{rounds}: {err}");
        // Three rounds, one attempt each, none passing: not 128.
        assert_eq!(sb.worker_records().len(), 3, "{rounds}: {err}");
        assert_eq!(
            err.matches("(--stall 3); stopping").count(),
            1,
            "{rounds}: {err}"
        );
        let text = sb.prd_text();
        assert!(text.contains("\niteration: 3\n"), "{rounds}: {text}");
    }
}
