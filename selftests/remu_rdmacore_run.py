#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""
remu_rdmacore_run.py - run rdma-core's own test suite (the tests/ directory
that python3-pyverbs installs) and print its result as KTAP, one line per
test.  Called by remu_rdmacore_test.sh with an unpacked copy of the suite:

    remu_rdmacore_run.py SUITE_DIR SKIPS_FILE --dev DEV --gid N [TEST...]

The suite runs as its own run_tests.py runs it (the "tests" package and
its load_tests(), the same command-line options, unittest's loader and
runner), with one difference, below.  Each test prints as it ends:
    ok N ID                      passed
    not ok N ID                  failed or raised (its traceback follows
                                 as "# " lines)
    ok N ID # SKIP REASON        skipped, and SKIPS_FILE lists it
    not ok N ID # unexpected skip: MSG
                                 skipped, but SKIPS_FILE does not list it:
                                 a test remu should pass stopped running
SKIPS_FILE has one "PATTERN<tab>REASON" a line (PATTERN an fnmatch
pattern on the test id, "#" comments); REASON is what the KTAP line
says, followed by the suite's own message.  Exit status 0 when no line
is "not ok".

The difference: the suite of rdma-core 44 finds a device's netdev (and so
its IP address, which the RDMA CM tests bind to) only under the device's
parent, /sys/class/infiniband/DEV/device/net/.  A software device (remu,
rxe) on a veth has no parent device, and the RDMA CM tests then skip
("doesn't have net interface").  rdma-core 46 asks the kernel instead
(`rdma link show`: the netdev of DEV's port); this runner gives the
v44 suite that lookup, written here, so the RDMA CM tests run on remu.
"""
import fnmatch
import json
import os
import subprocess
import sys
import traceback
import unittest


def read_skips(path):
    skips = []
    with open(path) as f:
        for line in f:
            line = line.rstrip('\n')
            if not line.strip() or line.lstrip().startswith('#'):
                continue
            pattern, _, reason = line.partition('\t')
            skips.append((pattern.strip(), reason.strip()))
    return skips


def netdev_of(dev, port=1):
    """The netdev of DEV's PORT as the kernel's RDMA netlink reports it."""
    out = subprocess.check_output(['rdma', '-j', 'link', 'show'])
    for row in json.loads(out.decode()):
        if row.get('ifname') == dev and row.get('port') == port and \
                row.get('netdev'):
            return row['netdev']
    return None


def give_suite_the_netdev_lookup(base):
    orig = base.RDMATestCase.get_net_name

    def get_net_name(dev):
        name = netdev_of(dev)
        return name if name else orig(dev)

    base.RDMATestCase.get_net_name = staticmethod(get_net_name)

    # _get_ip_mac() tests for the parent directory before it asks
    # get_net_name(); answer it for devices whose netdev the kernel knows
    orig_get_ip_mac = base.RDMATestCase._get_ip_mac

    def _get_ip_mac(self, dev, port, idx):
        name = None
        if not os.path.exists(f'/sys/class/infiniband/{dev}/device/net/'):
            name = netdev_of(dev, port)
        if not name:
            return orig_get_ip_mac(self, dev, port, idx)
        try:
            ip_addr, mac_addr = self.get_ip_mac_address(name)
        except (KeyError, IndexError):
            self.args.append([dev, port, idx, None, None])
        else:
            self.args.append([dev, port, idx, ip_addr, mac_addr])

    base.RDMATestCase._get_ip_mac = _get_ip_mac


class KtapResult(unittest.TestResult):
    def __init__(self, skips):
        super().__init__()
        self.skips = skips
        self.n = 0
        self.counts = {'pass': 0, 'fail': 0, 'skip': 0}

    def line(self, status, test, comment='', diag=''):
        self.n += 1
        print(f'{status} {self.n} {test.id()}{comment}', flush=True)
        for d in diag.rstrip('\n').split('\n') if diag else []:
            print('# ' + d, flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self.counts['pass'] += 1
        self.line('ok', test)

    def _fail(self, test, err):
        self.counts['fail'] += 1
        self.line('not ok', test, '',
                  ''.join(traceback.format_exception(*err)))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail(test, err)

    def addError(self, test, err):
        super().addError(test, err)
        self._fail(test, err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        msg = ' '.join(str(reason).split())
        for pattern, why in self.skips:
            if fnmatch.fnmatchcase(test.id(), pattern):
                self.counts['skip'] += 1
                self.line('ok', test, f' # SKIP {why} (suite: {msg})')
                return
        self.counts['fail'] += 1
        self.line('not ok', test, f' # unexpected skip: {msg}')

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.counts['pass'] += 1
        self.line('ok', test, ' # expected failure')

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.counts['fail'] += 1
        self.line('not ok', test, ' # unexpected success')


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    suite_dir = os.path.abspath(sys.argv[1])
    skips = read_skips(sys.argv[2])
    # the suite's own start-up (run_tests.py): its directory on the path,
    # the package loaded as "tests", its options parsed
    sys.argv = [os.path.join(suite_dir, 'run_tests.py')] + sys.argv[3:]
    sys.path.insert(0, suite_dir)
    from importlib.machinery import SourceFileLoader
    from args_parser import parser
    tests = SourceFileLoader('tests', os.path.join(suite_dir, '__init__.py')
                             ).load_module()
    parser.parse_args()
    import tests.base
    give_suite_the_netdev_lookup(tests.base)

    # test names left on the command line (as run_tests.py takes them,
    # e.g. tests.test_cq) narrow the run
    names = [a for a in sys.argv[1:] if not a.startswith('-')]
    loader = unittest.defaultTestLoader
    suite = loader.loadTestsFromNames(names, tests) if names else \
        loader.loadTestsFromModule(tests)
    print('TAP version 13')
    print(f'1..{suite.countTestCases()}', flush=True)
    result = KtapResult(skips)
    suite.run(result)
    c = result.counts
    print(f"# Totals: pass:{c['pass']} fail:{c['fail']} xfail:0 xpass:0 "
          f"skip:{c['skip']} error:0", flush=True)
    sys.exit(0 if c['fail'] == 0 and result.n == suite.countTestCases()
             else 1)


if __name__ == '__main__':
    main()
