#!/bin/sh
# DEMO AGENT — a scripted stand-in for `claude`, so that prdloop can be tried without a model
# or an API key. It ignores its arguments, reads the prompt on stdin like `claude -p`, does a
# fixed piece of work for the criterion prdloop names in PRDLOOP_CRITERION, and prints a
# stream-json `result` line carrying `RESULT: <id> PASS|FAIL`, as Claude Code does.
# ISC-DOCS-1 fails on its first attempt on purpose, so the loop needs a second iteration.
set -eu
cat >/dev/null                      # the prompt; a real agent would act on it
id="${PRDLOOP_CRITERION:?prdloop sets PRDLOOP_CRITERION}"
attempt="${PRDLOOP_ATTEMPT:-1}"
mkdir -p site
sleep 1                             # pretend to think, so the parallel lanes are visible

result() { # $1 = PASS or "FAIL: reason"
  printf '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"total_cost_usd":0,"result":"RESULT: %s %s"}\n' "$id" "$1"
}

case "$id" in
  ISC-PAGE-1)
    printf '<!doctype html>\n<title>Demo</title>\n<link rel="stylesheet" href="style.css">\n<h1>Home</h1>\n<a href="about.html">About</a>\n' > site/index.html
    result PASS ;;
  ISC-PAGE-2)
    printf '<!doctype html>\n<title>About</title>\n<link rel="stylesheet" href="style.css">\n<a href="index.html">Home</a>\n' > site/about.html
    result PASS ;;
  ISC-STYLE-1)
    printf 'body { font-family: system-ui, sans-serif; }\n' > site/style.css
    result PASS ;;
  ISC-DOCS-1)
    if [ "$attempt" -lt 2 ]; then
      result "FAIL: (simulated) the first draft of the README was rejected"
    else
      printf '# Demo site\n\nOpen site/index.html in a browser.\n' >> site/README.md
      result PASS
    fi ;;
  ISC-DOCS-2)
    printf '\nPages: index.html, about.html\n' >> site/README.md
    result PASS ;;
  ISC-A-PAGE-1)
    if grep -rq 'src="http' site 2>/dev/null; then result "FAIL: a page loads a remote script"; else result PASS; fi ;;
  *)
    result "FAIL: the demo agent has no script for $id" ;;
esac
