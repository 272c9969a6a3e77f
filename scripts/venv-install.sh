# Sourced by setup.sh and setup-harbor.sh: `venv_installer VENV` picks the installer for that venv,
# `venv_install ARGS...` installs into it. uv (installed into the venv by pip) downloads and installs in
# parallel and compiles bytecode as pip does (Python started with PYTHONDONTWRITEBYTECODE would
# otherwise compile every import again in every process); SPU_INSTALLER=pip, or no uv to be had, uses
# pip. PIP_FIND_LINKS (a folder of local wheels) is passed on to uv, which does not read pip's settings.
# SPU_COMPILE_BYTECODE=lazy installs without compiling (uv): a module is compiled when it is first
# imported by a Python that writes bytecode. scripts/test.sh sets it: its tests import a small part of
# the venv, and write what they import. `venv_compiled VENV` marks a venv whose files are all compiled,
# and compiles a lazy one's first (modules compiled since are skipped, as up to date).
venv_installer() {
  VENV_DIR=$1
  if [ "${SPU_INSTALLER:-uv}" = "uv" ] && { "$VENV_DIR/bin/python" -m uv --version >/dev/null 2>&1 \
      || "$VENV_DIR/bin/python" -m pip install -q uv; }; then
    VENV_TOOL=uv
  else
    VENV_TOOL=pip
    "$VENV_DIR/bin/python" -m pip install -q --upgrade pip
  fi
}
venv_install() {
  if [ "$VENV_TOOL" = "uv" ]; then
    local links=()
    local folder
    for folder in ${PIP_FIND_LINKS:-}; do links+=(--find-links "$folder"); done
    local compile=(--compile-bytecode)   # uv compiles the whole site-packages, not only what it installed
    [ "${SPU_COMPILE_BYTECODE:-}" = "lazy" ] && compile=()
    "$VENV_DIR/bin/python" -m uv pip install -q --python "$VENV_DIR/bin/python" "${compile[@]}" \
      "${links[@]}" "$@"
  else
    "$VENV_DIR/bin/python" -m pip install -q "$@"
  fi
}
venv_compiled() {
  local mark="$1/.spu-compiled"
  if [ "${SPU_COMPILE_BYTECODE:-}" = "lazy" ]; then
    rm -f "$mark"
  elif [ ! -f "$mark" ]; then
    # a file that does not compile (test data written in Python 2, say) is skipped, as uv and pip do
    [ "${2:-}" = "installed" ] || "$1/bin/python" -m compileall -q -j 0 \
      "$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null || true
    touch "$mark"
  fi
}
