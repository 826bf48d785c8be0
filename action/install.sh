#!/usr/bin/env bash
# The action's install step: the release binary for this runner when there is one (its
# SHA-256 checked), else `cargo install --locked` of the action's own checkout (or of the
# asked version's tag). Writes `bin=<path>` to $GITHUB_OUTPUT.
set -euo pipefail

action_dir=${GITHUB_ACTION_PATH:-$(cd "$(dirname "$0")/.." && pwd)}
own_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$action_dir/Cargo.toml" | head -n 1)
version=${VERSION:-$own_version}
version=${version#v}
repo=${ACTION_REPOSITORY:-}
dest="${RUNNER_TEMP:-/tmp}/prdloop-$version"
mkdir -p "$dest"

case "${RUNNER_OS_NAME:-$(uname -s)}/${RUNNER_ARCH_NAME:-$(uname -m)}" in
  Linux/X64 | Linux/x86_64) target=x86_64-unknown-linux-gnu ;;
  Linux/ARM64 | Linux/aarch64) target=aarch64-unknown-linux-gnu ;;
  macOS/ARM64 | Darwin/arm64) target=aarch64-apple-darwin ;;
  *) target="" ;;
esac

sha256() {
  if command -v sha256sum >/dev/null; then sha256sum "$@"; else shasum -a 256 "$@"; fi
}

bin=""
if [ -n "$target" ] && [ -n "$repo" ]; then
  name="prdloop-$target"
  url="https://github.com/$repo/releases/download/v$version/$name.tar.gz"
  echo "trying the release binary $url"
  if curl -fsSL --retry 3 -o "$dest/$name.tar.gz" "$url" &&
    curl -fsSL --retry 3 -o "$dest/$name.tar.gz.sha256" "$url.sha256"; then
    (cd "$dest" && sha256 -c "$name.tar.gz.sha256")
    tar -xzf "$dest/$name.tar.gz" -C "$dest"
    bin="$dest/$name/prdloop"
  else
    echo "no release binary for $target at v$version"
  fi
fi

if [ -z "$bin" ]; then
  if [ -z "${VERSION:-}" ] || [ "$version" = "$own_version" ]; then
    echo "building prdloop $own_version from the action's checkout (cargo install --locked; minutes)"
    cargo install --locked --root "$dest" --path "$action_dir"
  else
    echo "building prdloop v$version from its tag (cargo install --locked; minutes)"
    cargo install --locked --root "$dest" --git "https://github.com/$repo" --tag "v$version" prdloop
  fi
  bin="$dest/bin/prdloop"
fi

"$bin" --version
echo "bin=$bin" >>"${GITHUB_OUTPUT:-/dev/null}"
