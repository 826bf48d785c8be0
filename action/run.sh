#!/usr/bin/env bash
# The action's run step: `prdloop run` with the inputs, its `--json` events kept to read the
# `end` event into the step's outputs (outcome, passing, total, cost, exit-code). The step
# fails when prdloop does, after writing the outputs.
set -uo pipefail

events="${RUNNER_TEMP:-/tmp}/prdloop-events.jsonl"
args=(run "$INPUT_PRD" --json -a "${INPUT_AGENTS:-1}")
if [ -n "${INPUT_MAX_ITERATIONS:-}" ]; then
  args+=(-n "$INPUT_MAX_ITERATIONS")
fi
if [ -n "${INPUT_AGENT:-}" ]; then
  args+=(--claude-bin "$INPUT_AGENT")
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
} >>"${GITHUB_OUTPUT:-/dev/null}"
exit "$status"
