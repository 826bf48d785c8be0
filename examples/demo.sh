#!/bin/sh
# Runs prdloop's main job on the bundled demo: a copy of examples/demo in a temporary folder,
# four parallel agents, and the scripted demo agent (no model, no API key needed).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/prdloop-demo.XXXXXX")
cp "$here/demo/PRD.md" "$here/demo/agent.sh" "$tmp/"
# A git repository with one commit, so that each lane is a repository of its own and its
# work is merged back as it passes (without git, the workers share the folder).
if command -v git >/dev/null 2>&1; then
  printf 'state/\n' > "$tmp/.gitignore"
  git -C "$tmp" init -q
  git -C "$tmp" add -A
  git -C "$tmp" -c user.name=demo -c user.email=demo@localhost commit -q -m "demo: start"
fi
cd "$here/.."
# cargo's own progress goes to stderr: a first build compiles every dependency.
echo "building prdloop (release): the first build takes several minutes, later ones seconds" >&2
cargo build --release --locked
echo "demo folder: $tmp"
echo "+ prdloop run $tmp/PRD.md -a 4 --claude-bin $tmp/agent.sh --state-dir $tmp/state"
status=0
./target/release/prdloop run "$tmp/PRD.md" -a 4 --claude-bin "$tmp/agent.sh" --state-dir "$tmp/state" || status=$?
echo
./target/release/prdloop status "$tmp/PRD.md" --state-dir "$tmp/state"
exit "$status"
