# Sourced by scripts/main.sh and scripts/test.sh: `phase NAME COMMAND...` runs the command and
# prints "== <prefix>: NAME took N s"; `phases_total` prints the time since sourcing.
phases_prefix=${phases_prefix:?set phases_prefix before sourcing scripts/phases.sh}
phases_start=$SECONDS
phase() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "== $phases_prefix: $name took $((SECONDS - start)) s"
}
phases_total() { echo "== $phases_prefix: $((SECONDS - phases_start)) s in all"; }
