# Sourced by setup.sh and setup-harbor.sh: `venv_installer VENV` picks the installer for that venv,
# `venv_install ARGS...` installs into it. uv (installed into the venv by pip) downloads and installs in
# parallel and compiles bytecode as pip does (Python started with PYTHONDONTWRITEBYTECODE would
# otherwise compile every import again in every process); SPU_INSTALLER=pip, or no uv to be had, uses
# pip. PIP_FIND_LINKS (a folder of local wheels) is passed on to uv, which does not read pip's settings.
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
    "$VENV_DIR/bin/python" -m uv pip install -q --python "$VENV_DIR/bin/python" --compile-bytecode \
      "${links[@]}" "$@"
  else
    "$VENV_DIR/bin/python" -m pip install -q "$@"
  fi
}
