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
.venv/bin/python -m pip install -q --disable-pip-version-check $editable "$spec"
# The wallet page's accessibility test runs axe-core, from npm, in the browser.
case ",$extras," in *,dev,*)
    [ -f .venv/npm/node_modules/axe-core/axe.min.js ] || npm install --silent --no-audit \
        --no-fund --no-save --prefix .venv/npm "axe-core@$AXE_CORE_VERSION" >/dev/null ;;
esac
echo "bootstrap: ready in .venv (byoa-skills $(.venv/bin/byoa-skills --version | cut -d' ' -f2))" >&2
