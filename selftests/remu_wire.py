#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""remu_wire.py - RoCEv2 packet tools for remu_wire_test.sh (run in the VM).

One process runs a whole batch (a python start costs up to a second in the
TCG guest).  The batch commands read one case a line on stdin and answer
on stdout, per case I (from 1): "diag I TEXT" lines, then "ok I" or
"fail I" (a case with no answer failed).

  cases DEV
        each line "CASE SRC DST NETNS [NAME=DELTA...]" (NETNS "-" for this
        one): send one crafted datagram (valid or hostile, see cases())
        from SRC to DST:4791 with an ordinary UDP socket made in NETNS;
        the ICRC is computed over the IP/UDP headers the kernel will build
        (unconnected socket with DF: IP ID 0).  Passes when every counter
        of DEV port 1 (all of its sysfs hw_counters, the counters `rdma
        statistic show link DEV/1` shows; before, and 0.3 s after the
        listed ones moved) moved by exactly the listed deltas, all the
        others not at all.
  rxe-interop RXE IFACE NETNS DEV
        each line "ud|rc SGID DGID MINPKTS": make upstream rxe (device RXE)
        transmit real RoCEv2 packets from its RoCE v2 GID SGID to DGID with
        no peer QP: UD SENDs of several sizes to a made-up QPN, or RC
        requests (multi-packet WRITE, SEND with immediate, READ, atomic) on
        an RC QP connected to a made-up QPN, which rxe sends and
        retransmits until its retry count runs out; count the RoCEv2
        frames (UDP dport 4791) arriving on IFACE in NETNS and verify each
        one's ICRC with this file's own implementation (so rxe's packets
        cross-check it).  Passes when at least MINPKTS arrived, every ICRC
        matched and DEV counted exactly those packets in rcvd_pkts and
        rcvd_no_qp, no other counter moving (`rdma statistic show link
        DEV/1` before and after).
  send CASE SRC DST
        send one crafted datagram, nothing checked (for a manual look).
"""
import ctypes
import os
import socket
import struct
import subprocess
import sys
import time
import zlib

ROCE_PORT = 4791


def icrc(frame_ip):
    """ICRC over IP header .. end of payload+pad (the ICRC not included)."""
    b = bytearray(frame_ip)
    if b[0] >> 4 == 4:
        iplen = (b[0] & 0xf) * 4
        b[1] = 0xff                     # TOS
        b[8] = 0xff                     # TTL
        b[10:12] = b'\xff\xff'          # header checksum
    else:
        iplen = 40
        b[0] |= 0x0f                    # traffic class (high nibble)
        b[1:4] = b'\xff\xff\xff'        # traffic class (low), flow label
        b[7] = 0xff                     # hop limit
    b[iplen + 6:iplen + 8] = b'\xff\xff'    # UDP checksum
    b[iplen + 8 + 4] = 0xff                 # BTH resv8a: FECN, BECN, resv6a
    # CRC-32 seeded with 1s over 8 bytes of 1s (the masked LRH) + the rest;
    # zlib's final inversion is the ICRC's inversion
    return struct.pack('<I', zlib.crc32(b'\xff' * 8 + bytes(b)))


def bth(opcode, qpn, psn, pad=0, tver=0, pkey=0xffff, se=0, ackreq=0):
    return struct.pack('>BBHII', opcode, (se << 7) | (pad << 4) | tver, pkey,
                       qpn & 0xffffff, (ackreq << 31) | (psn & 0xffffff))


def deth(qkey=0x11111111, sqp=0x12):
    return struct.pack('>II', qkey, sqp)


# name -> (transport bytes after UDP without ICRC, corrupt the ICRC?, IP options)
def cases():
    ud = 0x64       # UD_SEND_ONLY
    return {
        'valid_ud': (bth(ud, 0x77, 1, pad=3) + deth() + b'hello' + b'\0' * 3,
                     False, None),
        'valid_ack': (bth(0x11, 0x77, 5) + struct.pack('>I', 0x1f000001),
                      False, None),
        'too_short': (b'\x64\x00\xff\xff\x00\x00\x00\x77', False, None),
        'bad_icrc': (bth(ud, 0x77, 1) + deth() + b'abcd', True, None),
        'bad_version': (bth(ud, 0x77, 1, tver=1) + deth() + b'abcd',
                        False, None),
        'unknown_opcode': (bth(0x15, 0x77, 1) + b'abcd', False, None),
        'rd_opcode': (bth(0x44, 0x77, 1) + b'\0' * 16 + b'abcd', False, None),
        'cnp_opcode': (bth(0x81, 0x77, 1) + b'\0' * 16, False, None),
        'xrc_opcode': (bth(0xa4, 0x77, 1) + b'\0' * 4 + b'abcd', False, None),
        'truncated_reth': (bth(0x0a, 0x77, 1) + b'\0' * 8, False, None),
        'truncated_deth': (bth(ud, 0x77, 1) + b'\0' * 4, False, None),
        'huge_pad': (bth(ud, 0x77, 1, pad=3) + deth(), False, None),
        'unaligned_payload': (bth(ud, 0x77, 1) + deth() + b'abcde',
                              False, None),
        'ack_with_payload': (bth(0x11, 0x77, 5) + struct.pack('>I', 0) +
                             b'abcd', False, None),
        'bad_pkey': (bth(ud, 0x77, 1, pkey=0x1234) + deth() + b'abcd',
                     False, None),
        'ip_options': (bth(ud, 0x77, 1) + deth() + b'abcd', False,
                       b'\x01\x01\x01\x00'),
    }


class Netns:
    """with Netns(name): the calling thread in network namespace NAME
    (ip netns's /run/netns/NAME; None: stay), back in its own after; a
    socket keeps the namespace it was made in."""
    CLONE_NEWNET = 0x40000000
    libc = ctypes.CDLL(None, use_errno=True)

    def __init__(self, name):
        self.name = name

    def _setns(self, fd):
        if self.libc.setns(fd, self.CLONE_NEWNET):
            e = ctypes.get_errno()
            raise OSError(e, 'setns %s: %s' % (self.name, os.strerror(e)))

    def __enter__(self):
        if self.name:
            self.home = os.open('/proc/self/ns/net', os.O_RDONLY)
            fd = os.open('/run/netns/' + self.name, os.O_RDONLY)
            try:
                self._setns(fd)
            finally:
                os.close(fd)
        return self

    def __exit__(self, *exc):
        if self.name:
            self._setns(self.home)
            os.close(self.home)


def stats(dev):
    """DEV port 1's counters as `rdma statistic show link DEV/1` prints
    them: "link DEV/1 name value name value..." """
    out = subprocess.run(['rdma', 'statistic', 'show', 'link', dev + '/1'],
                         check=True, capture_output=True, text=True).stdout
    t = out.split()[2:]
    return {t[i]: int(t[i + 1]) for i in range(0, len(t) - 1, 2)}


def hw_counter(dev, name):
    """one counter of DEV port 1 from sysfs (the same ib_core counters
    rdma statistic shows, read without a process start)"""
    with open('/sys/class/infiniband/%s/ports/1/hw_counters/%s' %
              (dev, name)) as f:
        return int(f.read())


def hw_stats(dev):
    """all counters of DEV port 1 from sysfs, as stats() has them"""
    d = '/sys/class/infiniband/%s/ports/1/hw_counters' % dev
    return {n: hw_counter(dev, n) for n in os.listdir(d) if n != 'lifespan'}


def wait_counters(dev, before, want, seconds=5):
    """wait until DEV's counters named in WANT moved by at least their
    delta from BEFORE (or SECONDS)"""
    end = time.time() + seconds
    while time.time() < end:
        if all(hw_counter(dev, n) - before[n] >= d for n, d in want.items()):
            return
        time.sleep(0.02)


def delta_errors(before, after, want):
    """every counter moved by exactly its delta in WANT, all others 0"""
    bad = []
    for n in sorted(set(before) | set(after)):
        got = after.get(n, 0) - before.get(n, 0)
        if n not in before or n not in after:
            bad.append('%s not listed both times' % n)
        elif got != want.get(n, 0):
            bad.append('%s moved by %d, expected %d' % (n, got, want.get(n, 0)))
    return bad


def batch(run):
    """run(fields, diag) for each stdin line; its answer: True passes"""
    for i, line in enumerate(sys.stdin, 1):
        def diag(text, i=i):
            for t in str(text).splitlines():
                print('diag %d %s' % (i, t), flush=True)
        try:
            ok = run(line.split(), diag)
        except Exception as ex:     # a broken case fails, the next runs
            diag('%s: %s' % (type(ex).__name__, ex))
            ok = False
        print('%s %d' % ('ok' if ok else 'fail', i), flush=True)


def send(name, src, dst, netns=None):
    payload, corrupt, ipopts = cases()[name]
    v6 = ':' in dst
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    with Netns(netns):
        s = socket.socket(fam, socket.SOCK_DGRAM)
    with s:
        s.bind((src, 0))
        sport = s.getsockname()[1]
        ulen = 8 + len(payload) + 4
        if v6:
            iph = struct.pack('>IHBB', 6 << 28, ulen, 17, 64) + \
                socket.inet_pton(fam, src) + socket.inet_pton(fam, dst)
        else:
            # IP_MTU_DISCOVER = IP_PMTUDISC_DO: DF set, so an unconnected
            # socket's packets carry IP ID 0
            s.setsockopt(socket.IPPROTO_IP, 10, 2)
            if ipopts:
                s.setsockopt(socket.IPPROTO_IP, 4, ipopts)     # IP_OPTIONS
            opts = ipopts or b''
            iph = struct.pack('>BBHHHBBH', 0x45 + len(opts) // 4, 0,
                              20 + len(opts) + ulen, 0, 0x4000, 64, 17, 0) + \
                socket.inet_aton(src) + socket.inet_aton(dst) + opts
        udph = struct.pack('>HHHH', sport, ROCE_PORT, ulen, 0)
        crc = icrc(iph + udph + payload)
        if corrupt:
            crc = bytes(x ^ 0x5a for x in crc)
        s.sendto(payload + crc, (dst, ROCE_PORT))


def cmd_cases(dev):
    def run(f, diag):
        name, src, dst, netns = f[:4]
        want = {k: int(v) for k, v in (kv.split('=') for kv in f[4:])}
        before = hw_stats(dev)
        send(name, src, dst, None if netns == '-' else netns)
        wait_counters(dev, before, want)
        time.sleep(0.3)     # anything else this packet moves, moves now
        bad = delta_errors(before, hw_stats(dev), want)
        diag('\n'.join(bad))
        return not bad
    batch(run)


class Capture:
    """the RoCEv2 frames (UDP dport 4791) arriving on IFACE in NETNS"""

    def __init__(self, iface, netns):
        with Netns(netns):
            self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                                   socket.htons(3))
            self.s.bind((iface, 0))
        # room for everything one case sends: it is read after the case
        self.s.setsockopt(socket.SOL_SOCKET, 33, 4 << 20)  # SO_RCVBUFFORCE

    def drain(self):
        self.s.setblocking(False)
        try:
            while True:
                self.s.recv(65535)
        except BlockingIOError:
            pass

    def count(self, quiet):
        """count frames until none came for QUIET seconds: (N, ICRC_OK,
        {opcode: N})"""
        n = ok = 0
        ops = {}
        self.s.settimeout(quiet)
        while True:
            try:
                frame, addr = self.s.recvfrom(65535)
            except socket.timeout:
                return n, ok, ops
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            etype = struct.unpack('>H', frame[12:14])[0]
            ip = frame[14:]
            if etype == 0x0800 and ip[9] == 17:
                iplen = (ip[0] & 0xf) * 4
                ip = ip[:struct.unpack('>H', ip[2:4])[0]]
            elif etype == 0x86dd and ip[6] == 17:
                iplen = 40
                ip = ip[:40 + struct.unpack('>H', ip[4:6])[0]]
            else:
                continue
            if struct.unpack('>H', ip[iplen + 2:iplen + 4])[0] != ROCE_PORT:
                continue
            n += 1
            op = ip[iplen + 8]
            ops[op] = ops.get(op, 0) + 1
            if icrc(ip[:-4]) == ip[-4:]:
                ok += 1


def gid_index(dev, gid, seconds=5):
    """the index of DEV port 1's RoCE v2 GID GID (waiting SECONDS for it)"""
    d = '/sys/class/infiniband/%s/ports/1/' % dev
    end = time.time() + seconds
    while True:
        for i in sorted(os.listdir(d + 'gids'), key=int):
            try:
                with open(d + 'gids/' + i) as f:
                    g = f.read().strip()
                with open(d + 'gid_attrs/types/' + i) as f:
                    t = f.read().strip()
            except OSError:
                continue
            if g == gid and t == 'RoCE v2':
                return int(i)
        if time.time() > end:
            raise RuntimeError('%s has no RoCE v2 GID %s' % (dev, gid))
        time.sleep(0.1)


def rxe_send(dev, sgid_index, dgid, what, diag):
    import pyverbs.enums as e
    from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
    from pyverbs.cq import CQ
    from pyverbs.device import Context
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
    from pyverbs.wr import SGE, SendWR

    ctx = Context(name=dev)
    try:
        pd = PD(ctx)
        cq = CQ(ctx, 64)
        mr = MR(pd, 8192, e.IBV_ACCESS_LOCAL_WRITE)
        mr.write(bytes(range(256)) * 32, 8192)
        gr = GlobalRoute(dgid=GID(dgid), sgid_index=sgid_index, hop_limit=64)
        ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
        cap = QPCap(max_send_wr=16, max_recv_wr=1, max_send_sge=1,
                    max_recv_sge=1)

        def wr(wr_id, opcode, length, imm=0, off=0):
            return SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, imm_data=imm,
                          sg=[SGE(mr.buf + off, length, mr.lkey)])

        def wait(count, seconds=20):
            done, status = 0, []
            end = time.time() + seconds
            while done < count and time.time() < end:
                n, wcs = cq.poll(count - done)
                done += n
                status += [wc.status for wc in wcs]
                if not n:
                    time.sleep(0.01)
            if done < count:
                raise RuntimeError('%s: only %d of %d completions' %
                                   (dev, done, count))
            return status

        if what == 'ud':
            qa = QPAttr()
            qa.qkey = 0x11111111
            qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
                                   cap=cap), qa)
            ah = AH(pd, attr=ah_attr)
            sizes = [(0, e.IBV_WR_SEND), (1, e.IBV_WR_SEND),
                     (7, e.IBV_WR_SEND), (1000, e.IBV_WR_SEND),
                     (13, e.IBV_WR_SEND_WITH_IMM)]
            for i, (n, op) in enumerate(sizes):
                w = wr(i, op, n, imm=0x12345678)
                w.set_wr_ud(ah, 0x77, 0x11111111)
                qp.post_send(w)
            st = wait(len(sizes))
            if any(s != e.IBV_WC_SUCCESS for s in st):
                raise RuntimeError('UD send completions: %s' % st)
            diag('%s: %d UD sends completed' % (dev, len(sizes)))
            return

        qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
        qa = QPAttr(port_num=1, path_mtu=e.IBV_MTU_1024)
        qa.qp_access_flags = 0
        qa.dest_qp_num = 0x5a5a
        qa.rq_psn = 0
        qa.sq_psn = 100
        qa.max_dest_rd_atomic = 1
        qa.max_rd_atomic = 4
        qa.min_rnr_timer = 1
        qa.timeout = 12         # 16.8 ms
        qa.retry_cnt = 1
        qa.rnr_retry = 0
        qa.ah_attr = ah_attr
        qp.to_rts(qa)
        wrs = [wr(1, e.IBV_WR_RDMA_WRITE, 3000),
               wr(2, e.IBV_WR_SEND_WITH_IMM, 5),
               wr(3, e.IBV_WR_RDMA_READ, 100),
               wr(4, e.IBV_WR_ATOMIC_CMP_AND_SWP, 8, off=4096),
               wr(5, e.IBV_WR_SEND, 2)]
        wrs[0].set_wr_rdma(0x1234, 0x10000)
        wrs[2].set_wr_rdma(0x1234, 0x20000)
        wrs[3].set_wr_atomic(0x1234, 0x30000, 1, 2)
        for w in wrs:
            qp.post_send(w)
        st = wait(len(wrs))
        diag('%s: RC requests ended with statuses %s (no responder exists)' %
             (dev, st))
    finally:
        ctx.close()


def cmd_rxe_interop(rxe, iface, netns, dev):
    cap = Capture(iface, netns)

    def run(f, diag):
        kind, sgid, dgid, least = f[0], f[1], f[2], int(f[3])
        idx = gid_index(rxe, sgid)
        cap.drain()
        before = stats(dev)
        rxe_send(rxe, idx, dgid, kind, diag)
        # rxe has completed every request: what it sent has arrived
        # when the wire stays quiet
        n, ok, ops = cap.count(quiet=0.5)
        diag('captured %d RoCEv2 packets on %s (python ICRC matches %d), '
             'opcodes %s' % (n, iface, ok, ' '.join(
                 '0x%02x:%d' % kv for kv in sorted(ops.items()))))
        want = {'rcvd_pkts': n, 'rcvd_no_qp': n}
        wait_counters(dev, before, want)
        bad = delta_errors(before, stats(dev), want)
        if n < least:
            bad.append('expected at least %d' % least)
        if ok != n:
            bad.append("python's ICRC disagrees with rxe's")
        diag('\n'.join(bad))
        return not bad
    batch(run)


def main():
    a = sys.argv[1:]
    if a[:1] == ['cases'] and len(a) == 2:
        cmd_cases(a[1])
    elif a[:1] == ['rxe-interop'] and len(a) == 5:
        cmd_rxe_interop(*a[1:])
    elif a[:1] == ['send'] and len(a) == 4:
        send(a[1], a[2], a[3])
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
