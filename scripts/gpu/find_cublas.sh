# find_cublas.sh, sourced by the GPU scripts: kernels/cuda searches the usual folders for
# cuBLAS; where PyTorch's wheels keep it elsewhere, python ($PY) knows, and this exports
# SUBLET_CUBLAS (left as it is when set).
if [[ -z ${SUBLET_CUBLAS:-} ]]; then
	found=$("${PY:-python3}" -c 'import glob, site, sys
for d in site.getsitepackages() + [site.getusersitepackages()]:
    for so in ("13", "12", "11"):
        for f in glob.glob(d + "/nvidia/*/lib/libcublas.so." + so):
            print(f); sys.exit()' 2>/dev/null) && [[ -n $found ]] && export SUBLET_CUBLAS=$found
fi
