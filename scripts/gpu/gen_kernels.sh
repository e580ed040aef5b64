#!/usr/bin/env bash
# gen_kernels.sh: compile the CUDA kernels of kernels/cuda/src with nvcc (any nvcc >= 11.8;
# no GPU needed) into the files kernels/cuda embeds and reviews:
#
#   kernels/cuda/gen/FAMILY.ptx      PTX for compute_80, one per src/FAMILY.cu (reviewed)
#   kernels/cuda/gen/FAMILY.fatbin   SASS for sm_80 and sm_90 plus that PTX (embedded)
#   kernels/cuda/gen/resources.txt   registers, stack, shared and local memory per kernel
#   kernels/cuda/gen/manifest.json   sha256 of every source and output, flags, nvcc version
#   kernels/cuda/zconst.go           cuBLAS enums and the structs' layout (src/zconst_gen.cu)
#
#   scripts/gpu/gen_kernels.sh           regenerate in place (run from anywhere in the repo)
#   scripts/gpu/gen_kernels.sh --check   regenerate into a temporary folder and compare:
#       exit 1 when a source changed without regenerating, or when the same nvcc
#       version gives different outputs; with another nvcc version (13 on the GPU
#       machine), report which outputs differ and keep them in $CHECK_OUT (default
#       .gpu/gen-check) for a look, exit 0 if they all compiled.
#
# A kernel that spills (local memory, a stack frame) fails the run. The PTX ISA
# follows nvcc's version: 7.8 from nvcc 11.8, which every driver >= 520 loads; 9.0
# from nvcc 13, which needs driver >= 580. Environment: NVCC (nvcc), NVCC_CCBIN (a
# host compiler for nvcc's -ccbin; found by trying g++, g++-11, g++-10, clang++
# otherwise).
set -euo pipefail
cd "$(dirname "$0")/../.." # the repository root, with or without git (the GPU machine has a copy)

check=0
case "${1:-}" in
"") ;;
--check) check=1 ;;
*) echo "gen_kernels.sh: unknown argument $1 (see the top of $0)" >&2; exit 2 ;;
esac

NVCC=${NVCC:-nvcc}
command -v "$NVCC" >/dev/null || { echo "gen_kernels.sh: $NVCC not found: install the CUDA toolkit (Debian: apt-get install nvidia-cuda-toolkit) or set NVCC" >&2; exit 1; }
PKG=kernels/cuda
SRC=$PKG/src
FAMILIES=$(cd "$SRC" && ls *.cu | grep -v '^zconst_gen\.cu$' | sed 's/\.cu$//' | LC_ALL=C sort)
ARCH=compute_80
CODES=sm_80,sm_90,compute_80
# -fmad=false: nvcc (and ptxas) contract no product and sum into a fused multiply-add,
# so each rounds on its own as in kernels/cpu (Go fuses none on amd64); a kernel that
# wants a fused one writes fma() (kernels/cuda's doc.go, "Numbers").
COMMON=(-std=c++17 -O3 -fmad=false -I"$SRC")
PTX_FLAGS=(-ptx -arch="$ARCH")
FATBIN_FLAGS=(-fatbin -fmad=false -arch="$ARCH" -code="$CODES")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The host compiler: nvcc refuses host compilers newer than it knows.
ccbin=()
probe() { printf '__global__ void k(){}\nint main(){return 0;}\n' >"$work/probe.cu" && "$NVCC" "$@" -o "$work/probe" "$work/probe.cu" >/dev/null 2>&1; }
if [[ -n ${NVCC_CCBIN:-} ]]; then
	ccbin=(-ccbin "$NVCC_CCBIN")
elif ! probe; then
	for c in g++-11 g++-10 clang++; do
		if command -v "$c" >/dev/null && probe -ccbin "$c"; then ccbin=(-ccbin "$c"); break; fi
	done
	if ((${#ccbin[@]} == 0)); then
		probe -allow-unsupported-compiler || { echo "gen_kernels.sh: $NVCC cannot compile with any host compiler found; set NVCC_CCBIN" >&2; exit 1; }
		ccbin=(-allow-unsupported-compiler)
	fi
fi

out=$work/out
mkdir -p "$out/gen"
# Compile with relative names from the output folder, so that no path of this machine
# lands in an output and the bytes depend on the sources and nvcc alone.
src_abs=$PWD/$SRC
for f in $FAMILIES; do
	cp "$SRC/$f.cu" "$out/gen/$f.cu"
done
cp "$SRC"/*.cuh "$out/gen/"
(
	cd "$out/gen"
	for f in $FAMILIES; do
		"$NVCC" "${ccbin[@]}" "${COMMON[@]/#-I$SRC/-I.}" "${PTX_FLAGS[@]}" -o "$f.ptx" "$f.cu"
		"$NVCC" "${ccbin[@]}" "${FATBIN_FLAGS[@]}" -o "$f.fatbin" "$f.ptx"
	done
	rm -f ./*.cu ./*.cuh
)
"$NVCC" "${ccbin[@]}" "${COMMON[@]}" -arch=sm_80 -o "$work/zconst_gen" "$src_abs/zconst_gen.cu"
"$work/zconst_gen" >"$out/zconst.go"

# The resource report; a kernel with local memory or a stack frame (spills, stack
# arrays, registers saved around a call) fails: declare it KERNEL_ROOM (common.cuh).
: >"$out/gen/resources.txt"
for f in $FAMILIES; do
	{
		echo "== $f"
		cuobjdump -res-usage "$out/gen/$f.fatbin" | grep -E "Fatbin|arch =|Function|REG" | sed 's/^[[:space:]]*//'
	} >>"$out/gen/resources.txt"
done
nvcc_version=$("$NVCC" --version | tail -n 2 | tr '\n' ' ' | sed 's/ *$//')
committed_nvcc=$(sed -n 's/^  "nvcc": "\(.*\)",$/\1/p' "$PKG/gen/manifest.json" 2>/dev/null || true)
# The committed outputs are pinned to one nvcc (docs/gpu.md says which and why): what it
# compiles is what runs, and it must not spill. Another version, in --check, only
# reports its spills: nvcc 13 gives a few kernels an 8-byte stack frame that 11.8 does
# not, and its outputs are never embedded.
if grep -B1 -E 'LOCAL:[1-9]|STACK:[1-9]' "$out/gen/resources.txt" >&2; then
	if ((!check)) || [[ $nvcc_version == "$committed_nvcc" ]]; then
		echo "gen_kernels.sh: the kernels above use local memory or a stack frame (spills); see gen/resources.txt and KERNEL_ROOM in src/common.cuh" >&2
		exit 1
	fi
	echo "gen_kernels.sh --check: note: with $nvcc_version the kernels above use local memory or a stack frame; the committed outputs are $committed_nvcc's, which do not" >&2
fi

ptx_isa=$(sed -n 's/^\.version //p' "$out/gen/$(echo "$FAMILIES" | head -n 1).ptx")
json_list() { # PREFIX FILE... : "name": "sha256", one per line, comma-separated
	local prefix=$1 first=1
	shift
	for f in "$@"; do
		((first)) || printf ',\n'
		first=0
		printf '    "%s": "%s"' "$prefix$(basename "$f")" "$(sha256sum "$f" | cut -d' ' -f1)"
	done
	printf '\n'
}
mapfile -t sources < <(ls "$SRC"/* | LC_ALL=C sort)
mapfile -t outputs < <(ls "$out"/gen/* | LC_ALL=C sort)
{
	printf '{\n'
	printf '  "generator": "scripts/gpu/gen_kernels.sh",\n'
	printf '  "nvcc": "%s",\n' "$nvcc_version"
	printf '  "ptx_isa": "%s",\n' "$ptx_isa"
	printf '  "ptx_flags": "%s",\n' "${COMMON[*]/#-I$SRC/-Isrc} ${PTX_FLAGS[*]}"
	printf '  "fatbin_flags": "%s",\n' "${FATBIN_FLAGS[*]}"
	printf '  "host_compiler": "%s",\n' "${ccbin[*]:-default}"
	printf '  "sources": {\n'
	json_list src/ "${sources[@]}"
	printf '  },\n'
	printf '  "outputs": {\n'
	json_list gen/ "${outputs[@]}"
	printf '  },\n'
	printf '  "zconst.go": "%s"\n' "$(sha256sum "$out/zconst.go" | cut -d' ' -f1)"
	printf '}\n'
} >"$work/manifest.json"
mv "$work/manifest.json" "$out/gen/manifest.json"

if ((!check)); then
	rm -rf "$PKG/gen"
	cp -r "$out/gen" "$PKG/gen"
	cp "$out/zconst.go" "$PKG/zconst.go"
	echo "gen_kernels.sh: $(echo "$FAMILIES" | wc -w) families with $nvcc_version (PTX ISA $ptx_isa) into $PKG/gen and $PKG/zconst.go" >&2
	exit 0
fi

# --check: the sources against the committed manifest, then the outputs.
committed=$PKG/gen/manifest.json
[[ -f $committed ]] || { echo "gen_kernels.sh --check: $committed is missing: run scripts/gpu/gen_kernels.sh" >&2; exit 1; }
if ! diff <(sed -n '/"sources"/,/}/p' "$committed") <(sed -n '/"sources"/,/}/p' "$out/gen/manifest.json") >&2; then
	echo "gen_kernels.sh --check: the sources changed since gen/ was made: run scripts/gpu/gen_kernels.sh and commit gen/ and zconst.go" >&2
	exit 1
fi
differ=()
for f in "$out"/gen/* "$out/zconst.go"; do
	name=${f#"$out"/}
	[[ $name == gen/manifest.json ]] && continue
	cmp -s "$f" "$PKG/$name" || differ+=("$name")
done
if ((${#differ[@]} == 0)); then
	echo "gen_kernels.sh --check: every output is identical ($nvcc_version)" >&2
	exit 0
fi
if [[ $committed_nvcc == "$nvcc_version" ]]; then
	echo "gen_kernels.sh --check: the same nvcc ($nvcc_version) gives other bytes for: ${differ[*]}" >&2
	exit 1
fi
CHECK_OUT=${CHECK_OUT:-.gpu/gen-check}
rm -rf "$CHECK_OUT"
mkdir -p "$CHECK_OUT"
cp -r "$out"/* "$CHECK_OUT"/
echo "gen_kernels.sh --check: the sources match gen/manifest.json; $nvcc_version (PTX ISA $ptx_isa) compiles them all; against the committed $committed_nvcc these differ: ${differ[*]} (kept in $CHECK_OUT)" >&2
