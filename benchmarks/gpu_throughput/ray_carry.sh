#!/usr/bin/env bash
# Builds .raywhl/ (git-ignored via .git/info/exclude) for a device call that runs --ray: the GPU image
# has no Ray and no network, and Ray 2.60.0's wheel (79 MB) is over the 64 MiB a call may carry.  So
# the wheel is unpacked, its Java jars, dashboard web client and RLlib (none used by kerntune's
# actors) removed, and the rest packed as tar.xz (29 MB), beside Ray's missing dependencies' wheels.
# On the GPU machine, after benchmarks/real_kernels/gpu_setup.sh:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .raywhl/*.whl
#   tar xJf .raywhl/ray_stripped.tar.xz -C /tmp/site
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.raywhl/' .git/info/exclude 2>/dev/null || echo /.raywhl/ >> .git/info/exclude
PIP=(python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
tmp=$(mktemp -d)
mkdir -p .raywhl
"${PIP[@]}" -d "$tmp" ray==2.60.0
"${PIP[@]}" -d .raywhl jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1
mkdir "$tmp/x" && (cd "$tmp/x" && unzip -q "$tmp"/ray-*.whl && rm -rf ray/jars ray/dashboard/client/build ray/rllib)
tar cJf .raywhl/ray_stripped.tar.xz -C "$tmp/x" .
rm -rf "$tmp"
du -sh .raywhl
