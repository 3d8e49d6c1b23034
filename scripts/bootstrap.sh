#!/usr/bin/env sh
# Sets up byoa-skills in ./.venv on a fresh machine, from the project's own files.
#
#   scripts/bootstrap.sh models       the engine and its embedded models (base, tiny.en)
#   scripts/bootstrap.sh dev,models   the same, plus what the tests need (sox, Node.js and
#                                     npm, Chromium and its headless shell, a C++ compiler for
#                                     llama.cpp's server, axe-core, pytest...)
#
# System tools come from the distribution's packages (apt-get, as root or through sudo);
# everything else from PyPI into the virtual environment.
set -eu
cd "$(dirname "$0")/.."
extras="${1:-}"
AXE_CORE_VERSION=4.14.1
# the dev extra asks for exactly this version (pyproject.toml)
LLAMA_CPP_VERSION=0.3.36

missing=""
case ",$extras," in *,dev,*)
    command -v sox >/dev/null 2>&1 || missing="$missing sox"
    command -v node >/dev/null 2>&1 || missing="$missing nodejs"
    command -v npm >/dev/null 2>&1 || missing="$missing npm"
    command -v g++ >/dev/null 2>&1 || missing="$missing g++"
    command -v chromium-headless-shell >/dev/null 2>&1 || missing="$missing chromium-headless-shell"
    # the full browser, for the extension's tests (the headless shell cannot run extensions)
    command -v chromium >/dev/null 2>&1 || missing="$missing chromium" ;;
esac
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo"
    else echo "bootstrap: please install:$missing" >&2; exit 1; fi
    echo "bootstrap: installing$missing" >&2
    # shellcheck disable=SC2086
    $sudo apt-get install -y -q $missing >/dev/null || {
        $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q $missing >/dev/null
    }
fi

python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' || {
    echo "bootstrap: Python 3.10 or newer is needed as python3" >&2; exit 1; }
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
if [ -n "$extras" ]; then spec=".[$extras]"; else spec="."; fi
# The tests run against the working tree (editable); a plain install is a copy.
case ",$extras," in *,dev,*) editable="-e" ;; *) editable="" ;; esac
# llama.cpp's server (the tests' text source) is compiled for any x86-64 CPU with AVX2, not
# for this one: a build for the newest CPUs (AVX-512, AMX) can crash on the machine it was
# made on. Its wheel is kept in a cache of its own, named by version and flags (pip's cache
# does not tell builds with other flags apart).
case ",$extras," in *,dev,*)
    llama="llama-cpp-python==$LLAMA_CPP_VERSION"
    # only the library the server loads: not the multimodal one (mtmd), which no test uses
    flags="-DLLAVA_BUILD=OFF"
    if [ "$(uname -m)" = x86_64 ]; then
        flags="$flags -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
        flags="$flags -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF"
    fi
    key=$(printf '%s %s' "$llama" "$flags" | cksum | cut -d' ' -f1)
    wheels="${XDG_CACHE_HOME:-$HOME/.cache}/byoa-skills/wheels/llama-$key"
    if ! ls "$wheels"/llama_cpp_python-*.whl >/dev/null 2>&1; then
        echo "bootstrap: compiling llama.cpp's server (a few minutes, once)" >&2
        CMAKE_ARGS="$flags" .venv/bin/python -m pip wheel -q --disable-pip-version-check \
            --no-deps --no-cache-dir --no-binary llama-cpp-python -w "$wheels" "$llama"
    fi
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --force-reinstall \
        "$wheels"/llama_cpp_python-*.whl ;;
esac
.venv/bin/python -m pip install -q --disable-pip-version-check $editable "$spec"
# The wallet page's accessibility test runs axe-core, from npm, in the browser.
case ",$extras," in *,dev,*)
    [ -f .venv/npm/node_modules/axe-core/axe.min.js ] || npm install --silent --no-audit \
        --no-fund --no-save --prefix .venv/npm "axe-core@$AXE_CORE_VERSION" >/dev/null ;;
esac
echo "bootstrap: ready in .venv (byoa-skills $(.venv/bin/byoa-skills --version | cut -d' ' -f2))" >&2
