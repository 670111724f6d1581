# SPDX-License-Identifier: GPL-2.0
#
# remu - convenience wrapper around kbuild (see Kbuild), the provider build
# inside rdma-core, the selftests and the VM test harness.
#
#   make            module + provider + selftests + tools (warnings are errors)
#   make C=1        the same, with sparse over the module
#   make check      everything, then the whole test suite in the VM
#   make check-debug  everything, then the suite in the VM on a debug kernel
#                   (lockdep, KASAN, kmemleak...; built once and cached, see
#                   scripts/debug-kernel and docs/testing.md)
#   make debug-kernel  only build (or find) that kernel
#   make demo       everything, then the guided tour in the VM
#   make demo CHAPTER=odp  only that chapter of the tour (tour/odp.c)
#   make setup      install what the build and the tests need (idempotent)
#   make install    install the module and the provider on this machine
#
# KVER/KDIR pick the kernel: by default the one rule in scripts/kver
# (newest installed Debian 6.12 amd64 kernel with headers).

KVER ?= $(shell $(CURDIR)/scripts/kver 2>/dev/null)
KDIR ?= $(if $(KVER),/usr/src/linux-headers-$(KVER))
MULTIARCH := $(shell gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
PROVIDER_LIBDIR ?= /usr/lib/$(MULTIARCH)/libibverbs
DRIVER_CONF_DIR ?= /etc/libibverbs.d
INSTALL_MOD_DIR ?= updates

.PHONY: all module provider selftests tools tour check check-debug debug-kernel demo setup install \
	install-module install-provider clean need-kdir

all: module provider selftests tools tour

need-kdir:
	@if [ -z "$(KDIR)" ] || [ ! -d "$(KDIR)" ]; then \
		echo "remu: no kernel build tree (KDIR='$(KDIR)'): run 'make setup' or pass KDIR=" >&2; \
		exit 1; fi

module: need-kdir
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

provider:
	scripts/build-provider

# after the provider: remu_flush_test links the rdma-core tree's libibverbs
selftests: provider
	$(MAKE) -C selftests

# programs of the project's own (tools/remu_dm_bench for scripts/bench --dm)
tools:
	$(MAKE) -C tools

# the tour's chapters (tour/*.c, run by scripts/demo)
tour:
	$(MAKE) -C tour

setup:
	scripts/setup

check: setup
	$(MAKE) all
	scripts/check

check-debug: setup
	$(MAKE) all
	scripts/check-debug

debug-kernel:
	scripts/debug-kernel

demo: setup
	$(MAKE) all
	REMU_CHAPTER=$(CHAPTER) scripts/vm -- scripts/demo

# builds nothing: run `make` first (as a user, not as root, if you like)
install: install-module install-provider

install-module: need-kdir
	@test -f remu.ko || { echo "remu: build first (make)" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) INSTALL_MOD_DIR=$(INSTALL_MOD_DIR) modules_install
	@# remu_test_mr.ko and remu_test_dmabuf.ko are selftest helpers, not part of an installation
	rm -f $(INSTALL_MOD_PATH)/lib/modules/$(KVER)/$(INSTALL_MOD_DIR)/remu_test_mr.ko* \
		$(INSTALL_MOD_PATH)/lib/modules/$(KVER)/$(INSTALL_MOD_DIR)/remu_test_dmabuf.ko*
	depmod -a $(KVER)

install-provider:
	@test -f build/provider/libremu-rdmav34.so || { echo "remu: build first (make)" >&2; exit 1; }
	install -D -m 0644 build/provider/libremu-rdmav34.so \
		$(DESTDIR)$(PROVIDER_LIBDIR)/libremu-rdmav34.so
	install -d $(DESTDIR)$(DRIVER_CONF_DIR)
	echo "driver remu" > $(DESTDIR)$(DRIVER_CONF_DIR)/remu.driver

clean:
	if [ -n "$(KDIR)" ] && [ -d "$(KDIR)" ]; then \
		$(MAKE) -C $(KDIR) M=$(CURDIR) clean; fi
	$(MAKE) -C selftests clean
	$(MAKE) -C tools clean
	$(MAKE) -C tour clean
	rm -rf build/provider
