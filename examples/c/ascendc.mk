# Builds examples/c/ascendc_add.cpp, the host program of the Ascend C add_custom sample, against
# libnpusim_acl in one command (from the repository root):
#
#     make -f examples/c/ascendc.mk run
#
# Reuse for another sample: set KERNEL (the kernel .cpp), MAIN (the host main.cpp) and
# STEM (the kernel file's name without .cpp):
#
#     make -f examples/c/ascendc.mk KERNEL=my_op.cpp STEM=my_op MAIN=main.cpp run
#
# RUN_MODE=cpu builds the CPU twin-debug variant (CANN's RUN_MODE=cpu): the kernel compiled with
# --cpu-debug, the host program with ASCENDC_CPU_DEBUG and __CCE_KT_TEST__ (tikicpulib.h).
#
# The rule: scripts/npusim-ascendc.sh compiles the kernel for the AI core and generates
# build/ascendc/aclrtlaunch_<kernel>.h and aclrtlaunch_$(STEM).cpp (the object embedded);
# the host compiler builds main.cpp with them and links libnpusim_acl.
NPUSIM ?= .
KERNEL ?= $(NPUSIM)/examples/ascendc/add_custom.cpp
STEM ?= add_custom
MAIN ?= $(NPUSIM)/examples/c/ascendc_add.cpp
RUN_MODE ?= npu
ifeq ($(RUN_MODE),cpu)
OUT ?= $(NPUSIM)/build/ascendc-cpu
TOOLFLAGS = --cpu-debug
HOSTFLAGS = -DASCENDC_CPU_DEBUG -D__CCE_KT_TEST__
else ifeq ($(RUN_MODE),npu)
OUT ?= $(NPUSIM)/build/ascendc
else
$(error RUN_MODE=$(RUN_MODE): npusim builds RUN_MODE=npu (the default) or RUN_MODE=cpu)
endif
CXX ?= c++
LIBDIR ?= $(NPUSIM)/target/release

$(OUT)/aclrtlaunch_$(STEM).cpp: $(KERNEL) $(wildcard $(NPUSIM)/device/sdk/ascendc/*.h)
	bash $(NPUSIM)/scripts/npusim-ascendc.sh $(TOOLFLAGS) $(KERNEL) $(OUT)

# Always asks cargo (a no-op when the library is up to date).
.PHONY: libnpusim_acl
libnpusim_acl:
	cargo build --release -p npusim-acl

$(OUT)/$(STEM)_host: $(MAIN) $(OUT)/aclrtlaunch_$(STEM).cpp libnpusim_acl
	$(CXX) -std=c++17 -O2 $(HOSTFLAGS) -I $(OUT) -I $(NPUSIM)/acl/include $(MAIN) $(OUT)/aclrtlaunch_$(STEM).cpp \
	    -L $(LIBDIR) -lnpusim_acl -Wl,-rpath,$(abspath $(LIBDIR)) -o $@

.PHONY: run
run: $(OUT)/$(STEM)_host
	$(OUT)/$(STEM)_host
