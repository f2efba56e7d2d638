# Source on the GPU machine (no network): installs the pinned package wheels brought along in .whl/
# into /tmp/site, ahead of the image's own packages.  The wheels: `pip download --no-deps` of the
# versions pinned in pyproject.toml's `packages` and `packages-e2e` extras, and pydantic (+ pydantic-core,
# annotated-types, typing-inspection: kerntune needs it and the GPU image lacks it), and flag-gems with what it
# imports (flaggems-requirements.txt: not in the extras, whose installs its exact numpy pin would hold to numpy 1.26).
# By package name, so that pip picks the one wheel of each that fits this Python (.whl/ may hold
# pydantic-core for several CPython versions; given them all by file, pip refused the whole install).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    --find-links .whl $(ls .whl/*.whl | sed 's#.*/##; s/-.*//' | sort -u)
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader
