#!/usr/bin/env bash
# The action's run step: `prdloop run` with the inputs, its `--json` events kept to read the
# `end` event into the step's outputs (outcome, passing, total, cost, exit-code). With a
# shard, it runs `--shard I/N --bundle DIR` and also says where the bundle is and a unique
# artifact name for it. The step fails when prdloop does, after writing the outputs.
set -uo pipefail

events="${RUNNER_TEMP:-/tmp}/prdloop-events.jsonl"
args=(run "$INPUT_PRD" --json -a "${INPUT_AGENTS:-1}")
if [ -n "${INPUT_MAX_ITERATIONS:-}" ]; then
  args+=(-n "$INPUT_MAX_ITERATIONS")
fi
if [ -n "${INPUT_AGENT:-}" ]; then
  args+=(--claude-bin "$INPUT_AGENT")
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
} >>"${GITHUB_OUTPUT:-/dev/null}"
exit "$status"
