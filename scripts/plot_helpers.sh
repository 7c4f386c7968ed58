# shellcheck shell=bash
# Shell helpers for the measurement scripts that draw their figure with gnuplot (sourced).
# need_gnuplot: installs gnuplot-nox if missing (Debian); false, with a line on stderr, if it
# cannot. gnuplot_term: pngcairo where this gnuplot has it, else png.
need_gnuplot() {
  command -v gnuplot >/dev/null && return 0
  echo "$(basename "$0"): installing gnuplot-nox for the plot" >&2
  apt-get install -y -q gnuplot-nox >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q gnuplot-nox >/dev/null 2>&1; } ||
    { echo "$(basename "$0"): could not install gnuplot-nox; no plot" >&2; return 1; }
}
gnuplot_term() {
  if gnuplot -e 'set terminal' 2>&1 | grep -q pngcairo; then echo pngcairo; else echo png; fi
}
