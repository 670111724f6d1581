// SPDX-License-Identifier: GPL-2.0
/*
 * remu_p2p_vfio_test - RDMA into and out of a PCI BAR that VFIO exports as
 * a dma-buf, with no system RAM in between (docs/p2p-testbed.md).
 *
 * Needs the P2P test bed: `scripts/vm --p2p` (an ivshmem-plain device and
 * a virtio-net NIC behind one emulated PCIe switch, a second NIC joined to
 * the first by a QEMU hub) booting a kernel with PCI_P2PDMA,
 * VFIO_PCI_DMABUF and a way to use VFIO without an IOMMU
 * (scripts/p2p-kernel; `make check-p2p` runs this test there).  Anywhere
 * else every test skips and says what is missing.
 *
 * Fixture vfio (the exporter alone, no remu): the ivshmem device is bound
 * to vfio-pci and opened through VFIO (no-IOMMU mode); BAR 2 is exported
 * with VFIO_DEVICE_FEATURE_DMA_BUF.  The BAR written through the region's
 * mmap reads back the same through the region's read() (the kernel's own
 * access to the BAR) and the other way round; the dma-buf has the BAR's
 * size, is VFIO's, and gives no CPU mapping; bad ranges are refused;
 * memory decode off (PCI_COMMAND through VFIO's config region) makes the
 * mmap fault (SIGBUS) and decode on brings the same bytes back.
 *
 * Fixture p2p (remu): remup0 on the NIC behind the switch (so that
 * pci_p2pdma_map_type() can place its PCI device against the ivshmem
 * device: PCI_P2PDMA_MAP_BUS_ADDR), remup1 on the other NIC in network
 * namespace p2ppeer; the dma-buf registered on remup0 with
 * ibv_reg_dmabuf_mr().  A remote WRITE from remup1 is seen through the
 * VFIO mmap byte for byte, a remote READ returns what the CPU wrote there,
 * remup0 sends from and receives into the BAR as a local buffer; memory
 * decode off revokes: the next remote access completes with
 * IBV_WC_REM_ACCESS_ERR, as on mlx5, and the BAR is untouched; decode on
 * again and the MR works again.  If remu refuses the registration with
 * EOPNOTSUPP, the test skips when the device's `absent` file has a line
 * saying why (a kernel without the means), and fails otherwise.
 *
 * The test sets up what it needs (vfio-pci binding, addresses, the
 * namespace, the two remu devices) and removes it when the program ends.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <net/if.h>
#include <linux/pci_regs.h>
#include <linux/vfio.h>

#include "kselftest_harness.h"
#include "remu_lib.h"

/* VFIO's dma-buf export (Linux 6.19 and 7.x uapi), for older headers */
#ifndef VFIO_DEVICE_FEATURE_DMA_BUF
#define VFIO_DEVICE_FEATURE_DMA_BUF 11
struct vfio_region_dma_range {
	__u64 offset;
	__u64 length;
};

struct vfio_device_feature_dma_buf {
	__u32 region_index;
	__u32 open_flags;
	__u32 flags;
	__u32 nr_ranges;
	struct vfio_region_dma_range dma_ranges[];
};
#endif

/* the test bed of scripts/vm --p2p */
#define SHM_VENDOR	0x1af4	/* QEMU's ivshmem */
#define SHM_DEVICE	0x1110
#define SHM_BAR		2	/* the shared memory */
#define NIC_MAC		"52:54:00:77:00:01"	/* behind the switch */
#define PEER_MAC	"52:54:00:77:00:02"	/* on the root bus */
#define DEV0		"remup0"
#define DEV1		"remup1"
#define NS		"p2ppeer"
#define IP0		"10.78.0.1"
#define IP1		"10.78.0.2"

#define HOST_SIZE	(1 << 20)
#define MR_IOVA		0x7e5600000000ULL
#define ACCESS_ALL	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* ---- sysfs ---- */

/* snprintf() for paths and messages: cut short if need be, as snprintf */
static int __attribute__((format(printf, 3, 4)))
strf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return n;
}

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	int ok;

	if (!f)
		return -1;
	ok = fgets(buf, len, f) != NULL;
	fclose(f);
	if (!ok)
		return -1;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

static long sysfs_hex(const char *dir, const char *file)
{
	char path[PATH_MAX], buf[64];

	strf(path, sizeof(path), "%s/%s", dir, file);
	if (read_line(path, buf, sizeof(buf)))
		return -1;
	return strtol(buf, NULL, 16);
}

/* The PCI address of the ivshmem device into @bdf: 0, or -1. */
static int find_shm(char *bdf, size_t len)
{
	DIR *d = opendir("/sys/bus/pci/devices");
	char dir[PATH_MAX];
	struct dirent *e;
	int ret = -1;

	if (!d)
		return -1;
	while (ret && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		strf(dir, sizeof(dir), "/sys/bus/pci/devices/%s", e->d_name);
		if (sysfs_hex(dir, "vendor") == SHM_VENDOR &&
		    sysfs_hex(dir, "device") == SHM_DEVICE) {
			strf(bdf, len, "%s", e->d_name);
			ret = 0;
		}
	}
	closedir(d);
	return ret;
}

/* The name of this namespace's netdev with MAC @mac into @ifname: 0/-1. */
static int find_netdev(const char *mac, char *ifname, size_t len)
{
	DIR *d = opendir("/sys/class/net");
	char path[PATH_MAX], addr[64];
	struct dirent *e;
	int ret = -1;

	if (!d)
		return -1;
	while (ret && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		strf(path, sizeof(path), "/sys/class/net/%s/address",
			 e->d_name);
		if (!read_line(path, addr, sizeof(addr)) && !strcmp(addr, mac)) {
			strf(ifname, len, "%s", e->d_name);
			ret = 0;
		}
	}
	closedir(d);
	return ret;
}

/*
 * The PCI device a netdev sits on, into @bdf: the nearest ancestor of
 * its device that is a PCI function (for virtio-net, the virtio device's
 * parent).  0, or -1 when there is none (a virtual netdev).
 */
static int netdev_pci_parent(const char *ifname, char *bdf, size_t len)
{
	char path[PATH_MAX], real[PATH_MAX], probe[PATH_MAX + 16];
	char *slash;

	strf(path, sizeof(path), "/sys/class/net/%s/device", ifname);
	if (!realpath(path, real))
		return -1;
	while ((slash = strrchr(real, '/')) && slash != real) {
		strf(probe, sizeof(probe), "%s/subsystem", real);
		if (realpath(probe, path) &&
		    !strcmp(strrchr(path, '/'), "/pci")) {
			strf(bdf, len, "%s", slash + 1);
			return 0;
		}
		*slash = 0;
	}
	return -1;
}

static int __attribute__((format(printf, 1, 2))) run(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return remu_sh(cmd);
}

/* ---- the test bed: what is missing, or NULL ---- */

static char shm_bdf[32];

static const char *bed_missing(char *why, size_t len)
{
	if (find_shm(shm_bdf, sizeof(shm_bdf))) {
		strf(why, len, "no ivshmem-plain device (the P2P test bed: scripts/vm --p2p, make check-p2p)");
		return why;
	}
	return NULL;
}

/*
 * Bind the ivshmem device to vfio-pci, with VFIO's no-IOMMU mode when the
 * guest has no IOMMU: NULL, or why it cannot be done (into @why).
 */
static const char *bind_vfio(char *why, size_t len)
{
	char dir[PATH_MAX], path[PATH_MAX + 32], drv[PATH_MAX];
	const char *noiommu =
		"/sys/module/vfio/parameters/enable_unsafe_noiommu_mode";
	bool have_iommu;

	strf(dir, sizeof(dir), "/sys/bus/pci/devices/%s", shm_bdf);
	strf(path, sizeof(path), "%s/driver", dir);
	if (realpath(path, drv) && !strcmp(strrchr(drv, '/'), "/vfio-pci"))
		return NULL;
	if (run("modprobe vfio-pci 2>/dev/null")) {
		strf(why, len, "no vfio-pci module in this kernel");
		return why;
	}
	strf(path, sizeof(path), "%s/iommu_group", dir);
	have_iommu = !access(path, F_OK);
	if (!have_iommu) {
		if (access(noiommu, F_OK)) {
			strf(why, len, "no IOMMU in the VM and this kernel's vfio has no no-IOMMU mode (CONFIG_VFIO_NOIOMMU: scripts/p2p-kernel)");
			return why;
		}
		if (write_str(noiommu, "1")) {
			strf(why, len, "cannot enable VFIO's no-IOMMU mode: %s",
				 strerror(errno));
			return why;
		}
	}
	strf(path, sizeof(path), "%s/driver/unbind", dir);
	if (!access(path, F_OK))
		write_str(path, shm_bdf);
	strf(path, sizeof(path), "%s/driver_override", dir);
	if (write_str(path, "vfio-pci") ||
	    write_str("/sys/bus/pci/drivers_probe", shm_bdf)) {
		strf(why, len, "binding %s to vfio-pci failed: %s", shm_bdf,
			 strerror(errno));
		return why;
	}
	strf(path, sizeof(path), "%s/driver", dir);
	if (!realpath(path, drv) || strcmp(strrchr(drv, '/'), "/vfio-pci")) {
		strf(why, len, "vfio-pci did not take %s", shm_bdf);
		return why;
	}
	return NULL;
}

static void unbind_vfio(void)
{
	char path[PATH_MAX];

	if (!shm_bdf[0])
		return;
	strf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver/unbind",
		 shm_bdf);
	if (!access(path, F_OK))
		write_str(path, shm_bdf);
	strf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver_override",
		 shm_bdf);
	write_str(path, "\n");
}

/* ---- VFIO ---- */

struct vfio {
	int container, group, dev;
	uint64_t bar_size, bar_off, cfg_off;
	uint8_t *bar;		/* the region's mmap */
	bool noiommu;
};

static void vf_close(struct vfio *v)
{
	if (v->bar && v->bar != MAP_FAILED)
		munmap(v->bar, v->bar_size);
	if (v->dev >= 0)
		close(v->dev);
	if (v->group >= 0)
		close(v->group);
	if (v->container >= 0)
		close(v->container);
	memset(v, 0, sizeof(*v));
	v->container = v->group = v->dev = -1;
}

/* Open the bound device and mmap BAR 2: 0, or -1 with errno. */
static int vf_open(struct vfio *v, char *why, size_t len)
{
	struct vfio_group_status st = { .argsz = sizeof(st) };
	struct vfio_region_info ri = { .argsz = sizeof(ri) };
	char path[PATH_MAX], grp[PATH_MAX], *name;
	int type;

	v->container = v->group = v->dev = -1;
	strf(path, sizeof(path), "/sys/bus/pci/devices/%s/iommu_group",
		 shm_bdf);
	if (!realpath(path, grp)) {
		strf(why, len, "%s has no IOMMU group", shm_bdf);
		return -1;
	}
	name = strrchr(grp, '/') + 1;
	strf(path, sizeof(path), "/dev/vfio/noiommu-%s", name);
	v->noiommu = !access(path, F_OK);
	if (!v->noiommu)
		strf(path, sizeof(path), "/dev/vfio/%s", name);
	v->container = open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC);
	v->group = open(path, O_RDWR | O_CLOEXEC);
	if (v->container < 0 || v->group < 0) {
		strf(why, len, "open /dev/vfio/vfio or %s: %s", path,
			 strerror(errno));
		return -1;
	}
	if (ioctl(v->container, VFIO_GET_API_VERSION) != VFIO_API_VERSION ||
	    ioctl(v->group, VFIO_GROUP_GET_STATUS, &st) ||
	    !(st.flags & VFIO_GROUP_FLAGS_VIABLE)) {
		strf(why, len, "VFIO group %s not viable", name);
		return -1;
	}
	type = v->noiommu ? VFIO_NOIOMMU_IOMMU : VFIO_TYPE1v2_IOMMU;
	if (ioctl(v->group, VFIO_GROUP_SET_CONTAINER, &v->container) ||
	    ioctl(v->container, VFIO_SET_IOMMU, type)) {
		strf(why, len, "VFIO container (IOMMU type %d): %s", type,
			 strerror(errno));
		return -1;
	}
	v->dev = ioctl(v->group, VFIO_GROUP_GET_DEVICE_FD, shm_bdf);
	if (v->dev < 0) {
		strf(why, len, "VFIO_GROUP_GET_DEVICE_FD: %s",
			 strerror(errno));
		return -1;
	}
	ri.index = VFIO_PCI_BAR0_REGION_INDEX + SHM_BAR;
	if (ioctl(v->dev, VFIO_DEVICE_GET_REGION_INFO, &ri) || !ri.size ||
	    !(ri.flags & VFIO_REGION_INFO_FLAG_MMAP)) {
		strf(why, len, "BAR %d: no mappable region", SHM_BAR);
		return -1;
	}
	v->bar_size = ri.size;
	v->bar_off = ri.offset;
	memset(&ri, 0, sizeof(ri));
	ri.argsz = sizeof(ri);
	ri.index = VFIO_PCI_CONFIG_REGION_INDEX;
	if (ioctl(v->dev, VFIO_DEVICE_GET_REGION_INFO, &ri)) {
		strf(why, len, "config region: %s", strerror(errno));
		return -1;
	}
	v->cfg_off = ri.offset;
	v->bar = mmap(NULL, v->bar_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		      v->dev, v->bar_off);
	if (v->bar == MAP_FAILED) {
		strf(why, len, "mmap of BAR %d: %s", SHM_BAR,
			 strerror(errno));
		return -1;
	}
	return 0;
}

/* PCI_COMMAND's memory decode on or off, through VFIO: 0 or -1. */
static int vf_decode(struct vfio *v, bool on)
{
	uint16_t cmd;

	if (pread(v->dev, &cmd, 2, v->cfg_off + PCI_COMMAND) != 2)
		return -1;
	cmd = on ? cmd | PCI_COMMAND_MEMORY : cmd & ~PCI_COMMAND_MEMORY;
	if (pwrite(v->dev, &cmd, 2, v->cfg_off + PCI_COMMAND) != 2)
		return -1;
	if (pread(v->dev, &cmd, 2, v->cfg_off + PCI_COMMAND) != 2)
		return -1;
	return !!(cmd & PCI_COMMAND_MEMORY) == on ? 0 : -1;
}

/*
 * A dma-buf of @nr ranges (@offs[i], @lens[i]) of BAR @bar:
 * the fd, or -1 with errno.
 */
static int vf_export(struct vfio *v, uint32_t bar, unsigned int nr,
		       const uint64_t *offs, const uint64_t *lens)
{
	uint64_t buf[16] = {};
	struct vfio_device_feature *f = (void *)buf;
	struct vfio_device_feature_dma_buf *db = (void *)f->data;
	unsigned int i;

	if (sizeof(*f) + sizeof(*db) + nr * sizeof(db->dma_ranges[0]) >
	    sizeof(buf)) {
		errno = E2BIG;
		return -1;
	}
	f->argsz = sizeof(*f) + sizeof(*db) + nr * sizeof(db->dma_ranges[0]);
	f->flags = VFIO_DEVICE_FEATURE_GET | VFIO_DEVICE_FEATURE_DMA_BUF;
	db->region_index = bar;
	db->open_flags = O_RDWR | O_CLOEXEC;
	db->nr_ranges = nr;
	for (i = 0; i < nr; i++) {
		db->dma_ranges[i].offset = offs[i];
		db->dma_ranges[i].length = lens[i];
	}
	return ioctl(v->dev, VFIO_DEVICE_FEATURE, f);
}

/* the whole of BAR 2 */
static int vf_export_bar(struct vfio *v)
{
	uint64_t off = 0, len = v->bar_size;

	return vf_export(v, SHM_BAR, 1, &off, &len);
}

/* Does reading the BAR's mmap at @off kill a child with SIGBUS? */
static bool bar_faults(struct vfio *v, uint64_t off)
{
	int st;
	pid_t pid = fork();

	if (!pid) {
		volatile uint8_t x = v->bar[off];

		(void)x;
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return false;
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS;
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 13 + seed * 7 + (i >> 9) + 1);
}

/* a value of a "name:\tvalue" line of /proc/self/fdinfo/@fd, or -1 */
static int fdinfo(int fd, const char *name, char *val, size_t len)
{
	char path[64], line[256];
	size_t n = strlen(name);
	int ret = -1;
	FILE *f;

	strf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (ret && fgets(line, sizeof(line), f)) {
		if (strncmp(line, name, n) || line[n] != ':')
			continue;
		line[strcspn(line, "\n")] = 0;
		strf(val, len, "%s", line + n + 1 + strspn(line + n + 1, " \t"));
		ret = 0;
	}
	fclose(f);
	return ret;
}

/* ---- fixture vfio: the exporter alone ---- */

FIXTURE(vfio) {
	struct vfio v;
};

FIXTURE_SETUP(vfio)
{
	char why[256];

	memset(&self->v, 0, sizeof(self->v));
	self->v.container = self->v.group = self->v.dev = -1;
	if (bed_missing(why, sizeof(why)))
		SKIP(return, "%s", why);
	if (bind_vfio(why, sizeof(why)))
		SKIP(return, "%s", why);
	ASSERT_EQ(0, vf_open(&self->v, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, vf_decode(&self->v, true));
}

FIXTURE_TEARDOWN(vfio)
{
	vf_close(&self->v);
}

/*
 * The BAR through its mmap and through read()/write() of the region (the
 * kernel's own access to the BAR): both see the same bytes.
 */
TEST_F(vfio, bar_mmap)
{
	struct vfio *v = &self->v;
	size_t len = 64 << 10;
	uint8_t *a = malloc(len), *b = malloc(len);
	uint64_t offs[] = { 0, v->bar_size / 2 + 4093, v->bar_size - len };
	unsigned int i;

	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	TH_LOG("%s BAR %d: %llu KiB, %s", shm_bdf, SHM_BAR,
	       (unsigned long long)v->bar_size >> 10,
	       v->noiommu ? "VFIO no-IOMMU mode" : "VFIO with an IOMMU");
	for (i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		fill(a, len, i);
		memcpy(v->bar + offs[i], a, len);
		ASSERT_EQ((ssize_t)len,
			  pread(v->dev, b, len, v->bar_off + offs[i]));
		EXPECT_EQ(-1, remu_cmp(a, b, len)) TH_LOG("mmap -> read at %llu",
						     (unsigned long long)offs[i]);
		fill(a, len, i + 100);
		ASSERT_EQ((ssize_t)len,
			  pwrite(v->dev, a, len, v->bar_off + offs[i]));
		EXPECT_EQ(-1, remu_cmp(v->bar + offs[i], a, len))
			TH_LOG("write -> mmap at %llu", (unsigned long long)offs[i]);
	}
	free(a);
	free(b);
}

/*
 * VFIO_DEVICE_FEATURE_DMA_BUF: a dma-buf of the BAR's size from VFIO,
 * with no CPU mapping of its own (a P2P exporter: importers get DMA
 * addresses only); bad ranges refused.
 */
TEST_F(vfio, dma_buf_export)
{
	struct vfio *v = &self->v;
	uint64_t off[2], len[2];
	char val[64];
	void *p;
	int fd;

	fd = vf_export_bar(v);
	if (fd < 0 && (errno == ENOTTY || errno == EOPNOTSUPP))
		SKIP(return, "this kernel's vfio-pci has no VFIO_DEVICE_FEATURE_DMA_BUF (CONFIG_VFIO_PCI_DMABUF: PCI_P2PDMA): %s",
		     strerror(errno));
	ASSERT_LE(0, fd) TH_LOG("VFIO_DEVICE_FEATURE_DMA_BUF: %s",
				strerror(errno));
	ASSERT_EQ(0, fdinfo(fd, "size", val, sizeof(val)));
	EXPECT_EQ(v->bar_size, strtoull(val, NULL, 0));
	ASSERT_EQ(0, fdinfo(fd, "exp_name", val, sizeof(val)));
	EXPECT_NE(NULL, strstr(val, "vfio")) TH_LOG("exporter %s", val);
	p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	EXPECT_EQ(MAP_FAILED, p);
	if (p != MAP_FAILED)
		munmap(p, 4096);
	close(fd);

	/* two ranges make one dma-buf of their total size */
	off[0] = 0;
	len[0] = 8192;
	off[1] = v->bar_size - 4096;
	len[1] = 4096;
	fd = vf_export(v, SHM_BAR, 2, off, len);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, fdinfo(fd, "size", val, sizeof(val)));
	EXPECT_EQ(12288, strtoull(val, NULL, 0));
	close(fd);

	/* no range, an unaligned one, one beyond the BAR, BAR 1 (none) */
	EXPECT_EQ(-1, vf_export(v, SHM_BAR, 0, off, len));
	EXPECT_EQ(EINVAL, errno);
	off[0] = 100;
	EXPECT_EQ(-1, vf_export(v, SHM_BAR, 1, off, len));
	EXPECT_EQ(EINVAL, errno);
	off[0] = v->bar_size;
	EXPECT_EQ(-1, vf_export(v, SHM_BAR, 1, off, len));
	EXPECT_EQ(EINVAL, errno);
	off[0] = 0;
	EXPECT_EQ(-1, vf_export(v, 1, 1, off, len));
	EXPECT_EQ(ENODEV, errno);
}

/*
 * Memory decode off through VFIO's config space: the BAR's mmap faults
 * (what revokes the dma-buf revokes the CPU's mapping too); decode on
 * again: the same bytes are back.
 */
TEST_F(vfio, decode_off_on)
{
	struct vfio *v = &self->v;
	uint8_t want[4096];
	int fd;

	fill(want, sizeof(want), 7);
	memcpy(v->bar + 8192, want, sizeof(want));
	EXPECT_FALSE(bar_faults(v, 8192));
	fd = vf_export_bar(v);
	ASSERT_EQ(0, vf_decode(v, false));
	EXPECT_TRUE(bar_faults(v, 8192));
	ASSERT_EQ(0, vf_decode(v, true));
	EXPECT_FALSE(bar_faults(v, 8192));
	EXPECT_EQ(-1, remu_cmp(v->bar + 8192, want, sizeof(want)));
	if (fd >= 0)
		close(fd);
}

/* ---- fixture p2p: remu imports the BAR ---- */

/* Make remup0/remup1 and their addresses (once): NULL, or why not. */
static const char *topo_up(char *why, size_t len)
{
	char nic[IFNAMSIZ + 1], peer[IFNAMSIZ + 1], pci[32], bdf[32];
	int i;

	if (!access("/sys/class/infiniband/" DEV0, F_OK) &&
	    !access("/sys/class/infiniband/" DEV1, F_OK))
		return NULL;
	run("modprobe virtio_net 2>/dev/null");
	for (i = 0; i < 50 && find_netdev(NIC_MAC, nic, sizeof(nic)); i++)
		usleep(100000);
	if (i == 50) {
		strf(why, len, "no netdev with MAC %s (scripts/vm --p2p)",
			 NIC_MAC);
		return why;
	}
	if (netdev_pci_parent(nic, pci, sizeof(pci))) {
		strf(why, len, "netdev %s has no PCI parent", nic);
		return why;
	}
	/* the switch: the NIC and the ivshmem device under one port */
	find_shm(bdf, sizeof(bdf));
	if (run("[ $(readlink -f /sys/bus/pci/devices/%s/../..) = $(readlink -f /sys/bus/pci/devices/%s/../..) ]",
		pci, bdf)) {
		strf(why, len, "%s and %s are not behind one switch", pci,
			 bdf);
		return why;
	}
	if (run("ip netns add " NS " 2>/dev/null; ip -n " NS " link set lo up"))
		goto fail;
	/* the peer NIC into the namespace (it may still be on its way
	 * back from one a previous run deleted) */
	for (i = 0; i < 50; i++) {
		if (!find_netdev(PEER_MAC, peer, sizeof(peer))) {
			if (run("ip link set %s netns " NS, peer))
				goto fail;
			break;
		}
		if (!run("ip -n " NS " -o link | grep -q " PEER_MAC))
			break;
		usleep(100000);
	}
	if (i == 50)
		goto fail;
	if (run("ip link set %s up && ip addr replace " IP0 "/24 dev %s", nic,
		nic) ||
	    run("p=$(ip -n " NS " -o link | grep " PEER_MAC " | cut -d: -f2 | tr -d ' ' | cut -d@ -f1) && "
		"ip -n " NS " link set $p up && ip -n " NS " addr replace " IP1 "/24 dev $p && "
		"ip netns exec " NS " rdma link add " DEV1 " type remu netdev $p") ||
	    run("rdma link add " DEV0 " type remu netdev %s", nic))
		goto fail;
	return NULL;
fail:
	strf(why, len, "setting up %s/%s failed", DEV0, DEV1);
	return why;
}

static void topo_down(void)
{
	run("ip netns exec " NS " rdma link delete " DEV1 " 2>/dev/null;"
	    "rdma link delete " DEV0 " 2>/dev/null;"
	    "ip netns delete " NS " 2>/dev/null;"
	    "ip -o link | grep " NIC_MAC " | cut -d: -f2 | tr -d ' ' | "
	    "xargs -r -I{} ip addr flush dev {}");
}

/*
 * The program's end, in the harness's parent (each test runs in a child,
 * which leaves with _exit()): undo what the tests set up, found in the
 * system rather than remembered.
 */
static void __attribute__((destructor)) p2p_cleanup(void)
{
	char path[PATH_MAX], val[64];

	if (!access("/sys/class/infiniband/" DEV0, F_OK) ||
	    !access("/sys/class/infiniband/" DEV1, F_OK) ||
	    !access("/run/netns/" NS, F_OK))
		topo_down();
	if (find_shm(shm_bdf, sizeof(shm_bdf)))
		return;
	strf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver_override",
		 shm_bdf);
	if (!read_line(path, val, sizeof(val)) && !strcmp(val, "vfio-pci"))
		unbind_vfio();
}

struct end {
	struct remu_end e;
	int gid_index;
	uint8_t *host;
	struct ibv_mr *host_mr;
};

static int end_open(struct end *x, const char *dev)
{
	static const struct ibv_qp_cap cap = {
		.max_send_wr = 16, .max_recv_wr = 16,
		.max_send_sge = 1, .max_recv_sge = 1,
	};
	struct ibv_context *ctx = remu_open(dev);
	int i;

	if (!ctx)
		return -1;
	for (i = 0; i < 50 && (x->gid_index = remu_ipv4_gid(ctx, NULL)) < 0; i++)
		usleep(100000);
	ibv_close_device(ctx);
	if (x->gid_index < 0 ||
	    remu_end_open(&x->e, dev, x->gid_index, 32, &cap))
		return -1;
	x->host = aligned_alloc(4096, HOST_SIZE);
	if (!x->host)
		return -1;
	memset(x->host, 0, HOST_SIZE);
	x->host_mr = ibv_reg_mr(x->e.pd, x->host, HOST_SIZE, ACCESS_ALL);
	return x->host_mr ? 0 : -1;
}

/* connect @x's QP to @peer's; @again: from whatever state it is in */
static int end_connect(struct end *x, struct end *peer, bool again)
{
	struct remu_conn_attr ra = REMU_RC_ATTR(0x31);

	ra.reset = again;

	return remu_end_connect(&x->e, &peer->e, &ra, x->gid_index);
}

static void end_close(struct end *x)
{
	if (x->host_mr)
		ibv_dereg_mr(x->host_mr);
	if (x->e.ctx)
		remu_end_close(&x->e);
	free(x->host);
	memset(x, 0, sizeof(*x));
}

/* one signalled RDMA op from @x, waited for: its status */
static int rdma(struct end *x, enum ibv_wr_opcode op, uint64_t laddr,
		uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	return remu_rdma1(x->e.qp, x->e.cq, op, laddr, lkey, len, raddr, rkey,
			  20);
}

#define HOST(x, off)	((uintptr_t)(x)->host + (off))

/* a "feature: reason" line of @dev's absent file about P2P, or NULL */
static const char *p2p_absent(const char *dev, char *why, size_t len)
{
	char path[256], line[256];
	const char *found = NULL;
	FILE *f;

	strf(path, sizeof(path), "/sys/class/infiniband/%s/absent", dev);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	while (!found && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (!colon)
			continue;
		*colon = 0;
		if (!strstr(line, "p2p") && !strstr(line, "peer"))
			continue;
		*colon = ':';
		line[strcspn(line, "\n")] = 0;
		strf(why, len, "%s", line);
		found = why;
	}
	fclose(f);
	return found;
}

FIXTURE(p2p) {
	struct vfio v;
	struct end a, b;	/* remup0 (owns the BAR MR), remup1 */
	int dbuf;
	struct ibv_mr *bmr;	/* the BAR, on remup0 */
	int mrs;
};

FIXTURE_SETUP(p2p)
{
	char why[256];

	memset(&self->v, 0, sizeof(self->v));
	memset(&self->a, 0, sizeof(self->a));
	memset(&self->b, 0, sizeof(self->b));
	self->v.container = self->v.group = self->v.dev = -1;
	self->dbuf = -1;
	self->bmr = NULL;
	self->mrs = -1;
	if (bed_missing(why, sizeof(why)))
		SKIP(return, "%s", why);
	if (bind_vfio(why, sizeof(why)))
		SKIP(return, "%s", why);
	ASSERT_EQ(0, vf_open(&self->v, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(0, vf_decode(&self->v, true));
	self->dbuf = vf_export_bar(&self->v);
	if (self->dbuf < 0 && (errno == ENOTTY || errno == EOPNOTSUPP))
		SKIP(return, "this kernel's vfio-pci has no VFIO_DEVICE_FEATURE_DMA_BUF (CONFIG_VFIO_PCI_DMABUF: PCI_P2PDMA)");
	ASSERT_LE(0, self->dbuf);
	ASSERT_LE(4 << 20, self->v.bar_size) TH_LOG("the offsets below want a BAR of 4 MiB or more");
	if (topo_up(why, sizeof(why)))
		SKIP(return, "%s", why);
	self->mrs = remu_obj_count("mr");
	ASSERT_EQ(0, end_open(&self->a, DEV0));
	ASSERT_EQ(0, end_open(&self->b, DEV1));
	ASSERT_EQ(0, end_connect(&self->a, &self->b, false));
	ASSERT_EQ(0, end_connect(&self->b, &self->a, false));
	memset(self->v.bar, 0, self->v.bar_size);
	self->bmr = ibv_reg_dmabuf_mr(self->a.e.pd, 0, self->v.bar_size,
				      MR_IOVA, self->dbuf, ACCESS_ALL);
	if (!self->bmr && errno == EOPNOTSUPP &&
	    p2p_absent(DEV0, why, sizeof(why)))
		SKIP(return, "remu refuses the VFIO dma-buf (EOPNOTSUPP): %s",
		     why);
	ASSERT_NE(NULL, self->bmr)
		TH_LOG("ibv_reg_dmabuf_mr of VFIO's BAR dma-buf on %s: %s, and no line of /sys/class/infiniband/%s/absent says why",
		       DEV0, strerror(errno), DEV0);
}

FIXTURE_TEARDOWN(p2p)
{
	if (self->bmr)
		EXPECT_EQ(0, ibv_dereg_mr(self->bmr));
	end_close(&self->a);
	end_close(&self->b);
	if (self->dbuf >= 0)
		close(self->dbuf);
	vf_close(&self->v);
	if (self->mrs >= 0)
		EXPECT_EQ(self->mrs, remu_obj_count("mr"));
}

static const uint32_t lens[] = { 1, 4095, 4097, 65537, 300000 };

/* remote WRITE from remup1 into the BAR: seen through VFIO's mmap */
TEST_F_TIMEOUT(p2p, remote_write, 120)
{
	struct end *b = &self->b;
	uint8_t *bar = self->v.bar;
	unsigned int i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint64_t off = (self->v.bar_size / 5) * i + 3 * i + 100;

		fill(b->host, lens[i], i);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  rdma(b, IBV_WR_RDMA_WRITE, HOST(b, 0),
			       b->host_mr->lkey, lens[i], MR_IOVA + off,
			       self->bmr->rkey));
		EXPECT_EQ(-1, remu_cmp(bar + off, b->host, lens[i]))
			TH_LOG("WRITE of %u at %llu", lens[i],
			       (unsigned long long)off);
		EXPECT_EQ(0, bar[off - 1]);
		EXPECT_EQ(0, bar[off + lens[i]]);
	}
}

/* remote READ by remup1 out of the BAR: what the CPU wrote there */
TEST_F_TIMEOUT(p2p, remote_read, 120)
{
	struct end *b = &self->b;
	uint8_t *bar = self->v.bar;
	unsigned int i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint64_t off = self->v.bar_size - lens[i] - 7 * i;

		fill(bar + off, lens[i], i + 40);
		memset(b->host, 0, lens[i]);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  rdma(b, IBV_WR_RDMA_READ, HOST(b, 0),
			       b->host_mr->lkey, lens[i], MR_IOVA + off,
			       self->bmr->rkey));
		EXPECT_EQ(-1, remu_cmp(b->host, bar + off, lens[i]))
			TH_LOG("READ of %u at %llu", lens[i],
			       (unsigned long long)off);
	}
}

/* remup0 with the BAR as its local buffer: WRITE out of it, READ into it */
TEST_F_TIMEOUT(p2p, local_buffer, 120)
{
	struct end *a = &self->a, *b = &self->b;
	uint8_t *bar = self->v.bar;
	unsigned int i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		fill(bar + 4096 + i, lens[i], i + 80);
		memset(b->host, 0, HOST_SIZE);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  rdma(a, IBV_WR_RDMA_WRITE, MR_IOVA + 4096 + i,
			       self->bmr->lkey, lens[i], HOST(b, 5),
			       b->host_mr->rkey));
		EXPECT_EQ(-1, remu_cmp(b->host + 5, bar + 4096 + i, lens[i]))
			TH_LOG("WRITE out of the BAR, %u bytes", lens[i]);

		fill(b->host, lens[i], i + 120);
		ASSERT_EQ(IBV_WC_SUCCESS,
			  rdma(a, IBV_WR_RDMA_READ, MR_IOVA + 65536 + i,
			       self->bmr->lkey, lens[i], HOST(b, 0),
			       b->host_mr->rkey));
		EXPECT_EQ(-1, remu_cmp(bar + 65536 + i, b->host, lens[i]))
			TH_LOG("READ into the BAR, %u bytes", lens[i]);
	}
}

/*
 * Memory decode off through VFIO revokes the dma-buf: remote WRITE and
 * READ complete with IBV_WC_REM_ACCESS_ERR (mlx5's status for an mkey
 * whose dma-buf pages were zapped), nothing lands in the BAR; the MR stays
 * an object.  Decode on again: the same MR works, new QPs (the old ones
 * went to the error state) move data both ways.
 */
TEST_F_TIMEOUT(p2p, revoke_decode, 120)
{
	struct end *a = &self->a, *b = &self->b;
	uint8_t *bar = self->v.bar;
	uint32_t len = 8192;

	/* a first access maps the dma-buf */
	fill(b->host, len, 1);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma(b, IBV_WR_RDMA_WRITE, HOST(b, 0), b->host_mr->lkey, len,
		       MR_IOVA, self->bmr->rkey));
	ASSERT_EQ(-1, remu_cmp(bar, b->host, len));

	ASSERT_EQ(0, vf_decode(&self->v, false));
	fill(b->host, len, 2);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma(b, IBV_WR_RDMA_WRITE, HOST(b, 0), b->host_mr->lkey, len,
		       MR_IOVA + 16384, self->bmr->rkey));
	ASSERT_EQ(0, end_connect(b, a, true));
	ASSERT_EQ(0, end_connect(a, b, true));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  rdma(b, IBV_WR_RDMA_READ, HOST(b, 0), b->host_mr->lkey, len,
		       MR_IOVA, self->bmr->rkey));
	ASSERT_EQ(0, end_connect(b, a, true));
	ASSERT_EQ(0, end_connect(a, b, true));

	ASSERT_EQ(0, vf_decode(&self->v, true));
	/* the refused WRITE left the BAR as it was */
	fill(b->host, len, 1);
	EXPECT_EQ(-1, remu_cmp(bar, b->host, len));
	memset(b->host, 0, len);
	EXPECT_EQ(0, bar[16384]);
	EXPECT_EQ(0, bar[16384 + len - 1]);

	/* re-mapped after the temporary revoke */
	fill(b->host, len, 3);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma(b, IBV_WR_RDMA_WRITE, HOST(b, 0), b->host_mr->lkey, len,
		       MR_IOVA + 16384, self->bmr->rkey));
	EXPECT_EQ(-1, remu_cmp(bar + 16384, b->host, len));
	fill(bar + 32768, len, 4);
	memset(b->host, 0, len);
	ASSERT_EQ(IBV_WC_SUCCESS,
		  rdma(b, IBV_WR_RDMA_READ, HOST(b, 0), b->host_mr->lkey, len,
		       MR_IOVA + 32768, self->bmr->rkey));
	EXPECT_EQ(-1, remu_cmp(b->host, bar + 32768, len));
}

TEST_HARNESS_MAIN
