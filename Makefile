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
#                   scripts/debug-kernel and docs/debug-kernel.md)
#   make debug-kernel  only build (or find) that kernel
#   make check-p2p  everything, then the peer-to-peer test (a PCI BAR that
#                   VFIO exports as a dma-buf) in a VM with P2P devices, on
#                   Debian's 7.3 (docs/p2p-testbed.md); not part of check
#   make demo       everything, then the guided tour in the VM
#   make demo CHAPTER=odp  only that chapter of the tour (tour/odp.c)
#   make timeline CHAPTER=odp  that chapter's timeline picture, recorded in
#                   the VM (scripts/timeline): build/timeline/odp.png
#   make setup      install what the build and the tests need (idempotent)
#   make install    install the module and the provider on this machine
#   make deb        Debian packages remu-dkms and libremu in build/deb/
#                   (debian/, dpkg-buildpackage; README "Install")
#
# KVER/KDIR pick the kernel: by default the one rule in scripts/kver
# (newest installed Debian 6.12 amd64 kernel with headers).  Other kernels
# (docs/portability.md): make setup KVER=6.1 (or 7.3), then make KVER=6.1,
# make check KVER=6.1.

# KVER may be a series (6.1, 6.12, 7.3: its newest release here) or a
# release; scripts/kver finds its kbuild tree, also one that
# scripts/backports-kernel built outside the checkout (7.3).
KVER_WANTED := $(KVER)
override KVER := $(shell $(CURDIR)/scripts/kver $(KVER) 2>/dev/null)
KDIR ?= $(if $(KVER),$(shell $(CURDIR)/scripts/kver --kdir $(KVER) 2>/dev/null))
MULTIARCH := $(shell gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
PROVIDER_LIBDIR ?= /usr/lib/$(MULTIARCH)/libibverbs
DRIVER_CONF_DIR ?= /etc/libibverbs.d
# remudv.h, libremu's direct verbs, beside libibverbs' own headers
VERBS_INCLUDEDIR ?= /usr/include/infiniband
INSTALL_MOD_DIR ?= updates

# DKMS (dkms.conf): the module's source in /usr/src/remu-VERSION
DKMS_VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' $(CURDIR)/dkms.conf)
DKMS_SRC ?= $(DESTDIR)/usr/src/remu-$(DKMS_VERSION)

.PHONY: all module provider selftests tools tour check check-debug debug-kernel check-p2p p2p-kernel demo timeline setup install \
	install-module install-provider clean need-kdir dkms-src dkms-install deb

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

# programs of the project's own (tools/remu_dm_bench for scripts/bench --dm);
# after the provider: remu_umr_bench links libremu
tools: provider
	$(MAKE) -C tools

# the tour's chapters (tour/*.c, run by scripts/demo); after the provider:
# tour/p2p links libremu
tour: provider
	$(MAKE) -C tour

setup:
	scripts/setup $(if $(KVER_WANTED),--kernel $(KVER_WANTED))

check: setup
	$(MAKE) all
	scripts/check $(if $(KVER_WANTED),--kernel $(KVER))

check-debug: setup
	$(MAKE) all
	scripts/check-debug

debug-kernel:
	scripts/debug-kernel

# Debian's 7.3 has PCI_P2PDMA; scripts/p2p-kernel adds a no-IOMMU vfio.ko
check-p2p:
	scripts/setup --kernel 7.3
	$(MAKE) all
	scripts/check-p2p

p2p-kernel:
	scripts/p2p-kernel

demo: setup
	$(MAKE) all
	REMU_CHAPTER=$(CHAPTER) scripts/vm -- scripts/demo

# a tour chapter's timeline (docs/tracing.md "A picture of a run")
TL_CHAPTER = $(or $(CHAPTER),odp)
TIMELINE ?= build/timeline/$(TL_CHAPTER).png
timeline: all
	mkdir -p $(dir $(TIMELINE))
	scripts/vm -- bash -c 'scripts/remu-up >/dev/null && \
		scripts/timeline -o $(TIMELINE) --title "tour chapter $(TL_CHAPTER)" \
			-- tour/run-chapter $(TL_CHAPTER); rc=$$?; \
		scripts/remu-down >/dev/null; exit $$rc'

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
	install -D -m 0644 userspace-provider/remu/remudv.h \
		$(DESTDIR)$(VERBS_INCLUDEDIR)/remudv.h

# the files DKMS builds from: Kbuild, dkms.conf, the driver, its uapi
# header and the compile probes
dkms-src:
	rm -rf $(DKMS_SRC)
	install -d $(DKMS_SRC)/drivers/remu $(DKMS_SRC)/uapi/rdma $(DKMS_SRC)/scripts
	install -m 0644 Kbuild dkms.conf LICENSE $(DKMS_SRC)/
	install -m 0644 drivers/remu/*.[ch] $(DKMS_SRC)/drivers/remu/
	install -m 0644 uapi/rdma/*.h $(DKMS_SRC)/uapi/rdma/
	install -m 0755 scripts/compat-probe $(DKMS_SRC)/scripts/

# add, build and install with DKMS for KVER (later kernels: DKMS's hooks)
dkms-install: dkms-src
	-dkms remove remu/$(DKMS_VERSION) --all >/dev/null 2>&1
	dkms add remu/$(DKMS_VERSION)
	dkms install remu/$(DKMS_VERSION) -k $(KVER)

# Debian packages from the checkout (debian/rules): the provider for the
# installed libibverbs, the module's source for DKMS; out of tree, in
# build/deb/ (with the .buildinfo and .changes).  Unsigned.
DEB_OUT := $(CURDIR)/build/deb
DEB_NAME = remu_$(shell dpkg-parsechangelog -S Version)_$(shell dpkg-architecture -qDEB_HOST_ARCH)
deb:
	rm -rf $(DEB_OUT)
	mkdir -p $(DEB_OUT)
	REMU_DEB_OUT=$(DEB_OUT) dpkg-buildpackage -b -us -uc \
		--buildinfo-file=$(DEB_OUT)/$(DEB_NAME).buildinfo \
		--buildinfo-option=-u$(DEB_OUT) \
		--changes-file=$(DEB_OUT)/$(DEB_NAME).changes \
		--changes-option=-u$(DEB_OUT)
	@ls -1 $(DEB_OUT)

clean:
	if [ -n "$(KDIR)" ] && [ -d "$(KDIR)" ]; then \
		$(MAKE) -C $(KDIR) M=$(CURDIR) clean; fi
	$(MAKE) -C selftests clean
	$(MAKE) -C tools clean
	$(MAKE) -C tour clean
	rm -rf build/provider
