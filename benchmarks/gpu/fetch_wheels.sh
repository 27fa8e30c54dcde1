#!/usr/bin/env bash
# Download, on a machine with the package index, the wheels the GPU test machine lacks for
# `import sweep` and a Ray Tune run (CPython 3.12, manylinux x86-64), into <repo>/.whl/
# (git-ignored; it travels to the GPU machine with the working tree). See benchmarks/gpu/README.md.
#
#   bash benchmarks/gpu/fetch_wheels.sh          (PYTHON=/path/to/python3.12 if python3.12 is not on PATH)
#
# Versions: pip resolves the project's dependencies and EXTRAS (pyproject.toml) against the GPU image's JAX
# and the Ray version checked there; only the distributions in SHIP (what the image lacks,
# /work/shared/gpu-machine.md) are downloaded, hash-checked. Ray is repacked without ray/jars/.
# The total must stay under LIMIT_MIB: a call to the GPU machine carries at most 64 MiB.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$ROOT/benchmarks/gpu"
DEST="$ROOT/.whl"
CACHE="${WHEEL_CACHE:-$HOME/.cache/seed-sweep/gpu-wheels}"
PYTHON="${PYTHON:-python3.12}"  # its pip resolves for the target (Requires-Python included)
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null \
    || { echo "fetch_wheels: PYTHON=$PYTHON is not a working Python 3.12; set PYTHON=/path/to/python3.12" >&2; exit 1; }
LIMIT_MIB=60
PINS=("ray[tune]==2.60.0" "jax==0.11.2" "jaxlib==0.11.2")  # Ray as checked there; JAX as installed there
EXTRAS=(pde hdf5)  # the extras the checks use: exponax makes check 7's 2D data, h5py reads check 6's file
# What the image lacks. typing-extensions is there, but pydantic needs a recent one (a newer copy
# shadows it harmlessly: it only adds names).
SHIP=(ray pdequinox tomli-w tensorboardx h5py exponax
      pydantic pydantic-core annotated-types typing-inspection typing-extensions
      jsonschema jsonschema-specifications referencing rpds-py)
TARGET=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_27_x86_64
        --platform manylinux_2_28_x86_64)

mkdir -p "$CACHE" "$DEST"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# the project's dependencies and those of its EXTRAS, as pyproject.toml names them
mapfile -t DEPS < <("$PYTHON" - "$ROOT/pyproject.toml" "${EXTRAS[@]}" <<'EOF'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(project["dependencies"] + [d for extra in sys.argv[2:] for d in project["optional-dependencies"][extra]]))
EOF
)
(( ${#DEPS[@]} )) || { echo "fetch_wheels: could not read the dependencies of $ROOT/pyproject.toml with $PYTHON" >&2; exit 1; }
echo "resolving for CPython 3.12 manylinux x86-64: ${DEPS[*]} + pins ${PINS[*]}"
"$PYTHON" -m pip install -q --dry-run --ignore-installed --target "$WORK/target" --report "$WORK/report.json" "${TARGET[@]}" \
    "${DEPS[@]}" "${PINS[@]}" 2> >(grep -v "is ignored: it is neither" >&2)

# name==version --hash=... for each shipped distribution; fail if one is not in the resolution.
"$PYTHON" - "$WORK/report.json" "$WORK/requirements.txt" "${SHIP[@]}" <<'EOF'
import json, re, sys
report, out, ship = sys.argv[1], sys.argv[2], sys.argv[3:]
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
found = {norm(i["metadata"]["name"]): i for i in json.load(open(report))["install"]}
missing = [n for n in ship if norm(n) not in found]
if missing:
    sys.exit(f"fetch_wheels: {missing} are not among the resolved dependencies: update SHIP")
with open(out, "w") as f:
    for n in ship:
        i = found[norm(n)]
        hashes = i["download_info"].get("archive_info", {}).get("hashes", {})
        f.write(f"{i['metadata']['name']}=={i['metadata']['version']}"
                + "".join(f" --hash={k}:{v}" for k, v in hashes.items()) + "\n")
left = sorted(f"{i['metadata']['name']} {i['metadata']['version']}" for n, i in found.items() if n not in map(norm, ship))
print("assumed on the GPU image (not shipped):", ", ".join(left))
EOF

"$PYTHON" -m pip download -q --no-deps --require-hashes "${TARGET[@]}" -d "$CACHE" -r "$WORK/requirements.txt" \
    2> >(grep -v "is ignored: it is neither" >&2)

rm -f "$DEST"/*.whl
while read -r line; do
    name="${line%%==*}"; rest="${line#*==}"; version="${rest%% *}"
    file="$(ls "$CACHE" | grep -i -E "^${name//[-_.]/[-_.]}-${version}-.*\.whl$" | head -n1)"
    [[ -n "$file" ]] || { echo "fetch_wheels: no wheel for $name $version in $CACHE" >&2; exit 1; }
    if [[ "$name" == ray ]]; then
        "$PYTHON" "$HERE/strip_wheel.py" "$CACHE/$file" "$DEST/$file" ray/jars/
    else
        cp "$CACHE/$file" "$DEST/$file"
    fi
done < "$WORK/requirements.txt"

echo "wheels in $DEST:"
(cd "$DEST" && ls -l --block-size=K ./*.whl | awk '{printf "  %8s  %s\n", $5, $9}')
total=$(cat "$DEST"/*.whl | wc -c)
printf 'total %.1f MiB (%d bytes) in %d wheels; limit %d MiB\n' "$(echo "$total / 1048576" | bc -l)" "$total" \
    "$(ls "$DEST"/*.whl | wc -l)" "$LIMIT_MIB"
if (( total > LIMIT_MIB * 1048576 )); then
    echo "fetch_wheels: FAILED: the wheels are $total bytes, over $LIMIT_MIB MiB; a GPU call carries 64 MiB in all" >&2
    exit 1
fi
