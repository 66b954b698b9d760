"""local_sshd.py: an sshd of the test's own for the scale-out tests (ci/nightly
and ipu-e2e-sweep through GNU parallel over real ssh): a host key and a user
key made with ssh-keygen in a temporary folder, AuthorizedKeysFile, PidFile
and the config there, listening on a free loopback port, run in the
foreground as the current user.  sshd() yields the sshloginfile line's file
and the path of sshd's log (one "Accepted publickey" line per login).
"""
import contextlib
import os
import socket
import subprocess
import time
from pathlib import Path

SSHD, SSH_KEYGEN = "/usr/sbin/sshd", "/usr/bin/ssh-keygen"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def sshd(folder):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # Run as root, sshd insists on its privilege separation folder, which the
    # service's unit creates at boot (RuntimeDirectory=sshd); a container has none.
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    for name in ("host_key", "user_key"):
        subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True)
    (folder / "authorized_keys").write_text((folder / "user_key.pub").read_text())
    port = free_port()
    config = folder / "sshd_config"
    config.write_text(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\n"
                      f"AuthorizedKeysFile {folder / 'authorized_keys'}\nPidFile {folder / 'sshd.pid'}\n"
                      "StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                      "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nMaxStartups 100\n"
                      "MaxSessions 100\n")
    log = folder / "sshd.log"
    with open(log, "wb") as handle:
        process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=handle, stderr=subprocess.STDOUT)
    try:
        began = time.monotonic()
        while True:
            assert process.poll() is None, f"sshd exited {process.returncode}: {log.read_text()}"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() - began < 10, f"sshd did not listen on port {port}: {log.read_text()}"
            time.sleep(0.05)
        logins = folder / "sshloginfile"
        logins.write_text(f"ssh -p {port} -i {folder / 'user_key'} -o StrictHostKeyChecking=no "
                          f"-o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR 127.0.0.1\n")
        yield logins, log
    finally:
        process.terminate()
        process.wait(timeout=10)
