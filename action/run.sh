#!/usr/bin/env bash
# The action's run step (or, with `audit: true`, `prdloop audit`): `prdloop run` with the inputs (each named input is its flag; `args`
# adds the rest), in `working-directory`, its `--json` events kept to read the `end` event
# into the step's outputs (outcome, passing, total, cost, exit-code; junit with `junit`). With a
# shard, it runs `--shard I/N --bundle DIR` and also says where the bundle is and a unique
# artifact name for it. With `import`, `prdloop import` writes the PRD first; with `pr`, the
# run is `--pr` and the pull request's address is the `pull-request` output. The step fails
# when prdloop does, after writing the outputs.
set -uo pipefail

events="${RUNNER_TEMP:-/tmp}/prdloop-events.jsonl"
if [ -n "${INPUT_WORKING_DIRECTORY:-}" ]; then
  cd "$INPUT_WORKING_DIRECTORY" || {
    echo "::error title=prdloop::working-directory \`$INPUT_WORKING_DIRECTORY\` cannot be entered"
    echo "exit-code=2" >>"${GITHUB_OUTPUT:-/dev/null}"
    exit 2
  }
fi
case "${INPUT_AGENT:-}" in
  */*)
    # Before the agent had names, `agent` was the program: say where it went.
    echo "::error title=prdloop::the \`agent\` input is the agent's name (claude, codex, …); give the program \`$INPUT_AGENT\` as \`agent-bin\`"
    echo "exit-code=2" >>"${GITHUB_OUTPUT:-/dev/null}"
    exit 2
    ;;
esac
if [ "${INPUT_AUDIT:-}" = true ]; then
  # Audit mode: do the PRD's checked ticks still hold on this checkout?
  echo "+ prdloop audit $INPUT_PRD --json"
  status=0
  "$PRDLOOP_BIN" audit "$INPUT_PRD" --json >"$events" || status=$?
  {
    echo "audit-holding=$(jq -s '[.[] | select(.finding == "holds")] | length' "$events" 2>/dev/null || echo 0)"
    echo "audit-regressed=$(jq -s '[.[] | select(.finding == "regressed" or .finding == "cannot_run")] | length' "$events" 2>/dev/null || echo 0)"
    echo "exit-code=$status"
  } >>"${GITHUB_OUTPUT:-/dev/null}"
  jq -r 'select(.finding == "regressed") | "::error title=prdloop audit::\(.id) regressed: `\(.command)`: \(.why)"' "$events" 2>/dev/null
  exit "$status"
fi
if [ -n "${INPUT_IMPORT:-}" ]; then
  # The tracker's open issues into the PRD first.
  import_args=(import "$INPUT_IMPORT" -o "$INPUT_PRD")
  if [ -n "${INPUT_IMPORT_ARGS:-}" ]; then
    read -r -a more <<<"$INPUT_IMPORT_ARGS"
    import_args+=("${more[@]}")
  fi
  echo "+ prdloop ${import_args[*]}"
  status=0
  "$PRDLOOP_BIN" "${import_args[@]}" || status=$?
  if [ "$status" -ne 0 ]; then
    echo "::error title=prdloop import::prdloop import $INPUT_IMPORT failed (exit $status)"
    echo "exit-code=$status" >>"${GITHUB_OUTPUT:-/dev/null}"
    exit "$status"
  fi
  if [ ! -f "$INPUT_PRD" ]; then
    echo "no open issue matches: nothing to run"
    echo "exit-code=0" >>"${GITHUB_OUTPUT:-/dev/null}"
    exit 0
  fi
fi
args=(run "$INPUT_PRD" --json)
if [ "${INPUT_PR:-}" = true ]; then
  args+=(--pr)
fi
# option INPUT-VALUE FLAG: the flag with the input's value, when the input is not empty.
option() {
  if [ -n "$1" ]; then
    args+=("$2" "$1")
  fi
}
option "${INPUT_AGENTS:-}" -a
option "${INPUT_MAX_ITERATIONS:-}" -n
option "${INPUT_AGENT:-}" --agent
option "${INPUT_AGENT_BIN:-}" --agent-bin
option "${INPUT_MODEL:-}" --model
option "${INPUT_BEST_OF:-}" --best-of
option "${INPUT_MAX_COST:-}" --max-cost
option "${INPUT_TIMEOUT:-}" --timeout
option "${INPUT_VERIFIER:-}" --verifier
junit=""
if [ -n "${INPUT_JUNIT:-}" ]; then
  case "$INPUT_JUNIT" in
    /*) junit="$INPUT_JUNIT" ;;
    *) junit="$PWD/$INPUT_JUNIT" ;;
  esac
  args+=(--junit "$junit")
fi
bundle=""
artifact=""
if [ -n "${INPUT_SHARD:-}" ]; then
  bundle="${INPUT_BUNDLE:-}"
  if [ -z "$bundle" ]; then
    bundle="${RUNNER_TEMP:-/tmp}/prdloop-bundle"
  fi
  # Artifact names may not hold `/`: 2/4 -> prdloop-shard-2-of-4.
  artifact="prdloop-shard-${INPUT_SHARD//\//-of-}"
  args+=(--shard "$INPUT_SHARD" --bundle "$bundle")
fi
if [ -n "${INPUT_ARGS:-}" ]; then
  read -r -a extra <<<"$INPUT_ARGS"
  args+=("${extra[@]}")
fi

echo "+ prdloop ${args[*]}"
status=0
"$PRDLOOP_BIN" "${args[@]}" >"$events" || status=$?

end=$(jq -c 'select(.event == "end")' "$events" 2>/dev/null | tail -n 1)
{
  if [ -n "$end" ]; then
    echo "outcome=$(jq -r '.outcome' <<<"$end")"
    echo "passing=$(jq -r '.passing' <<<"$end")"
    echo "total=$(jq -r '.total' <<<"$end")"
    echo "cost=$(jq -r '.costUsd' <<<"$end")"
  fi
  echo "exit-code=$status"
  if [ -n "$bundle" ]; then
    echo "bundle=$bundle"
    echo "artifact-name=$artifact"
  fi
  if [ -n "$junit" ]; then
    echo "junit=$junit"
  fi
  pull=$(jq -r 'select(.event == "pull_request") | .url' "$events" 2>/dev/null | tail -n 1)
  if [ -n "$pull" ]; then
    echo "pull-request=$pull"
  fi
} >>"${GITHUB_OUTPUT:-/dev/null}"
exit "$status"
