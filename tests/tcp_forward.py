"""A real TCP forwarder in front of a server, that goes down on cue: a second cloud URL for the
same vLLM server that can die in the middle of a request without stopping the real server.

    fwd = Forwarder(port_of_server, die_after=20)   # dies at the 21st POST /v1/completions
    fwd.url ... fwd.close()
    fwd.close(); ...; fwd.reopen()                   # down, then back on the same port
"""
from __future__ import annotations

import socket
import threading


class Forwarder:
    def __init__(self, target_port: int, die_after: int | None = None, host: str = "127.0.0.1"):
        self.target = (host, target_port)
        self.die_after, self.requests = die_after, 0
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def reopen(self) -> None:
        """Listen again on the same port after close() (a server that is back)."""
        self.listener = socket.create_server(self.target[:1] + (self.port,))
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.conns += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, up: bool) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                return
            if not data:
                _shut(dst)
                return
            if up and data.startswith(b"POST /v1/completions"):
                with self.lock:
                    self.requests += 1
                    dying = self.die_after is not None and self.requests > self.die_after
                if dying:       # the request never reaches the server: a crash mid-request
                    self.close()
                    return
            try:
                dst.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self.closed = True
        _shut(self.listener)        # wakes the thread blocked in accept(): a bare close() did not,
        try:                        # and that accept() took the next connection after all
            self.listener.close()
        except OSError:
            pass
        with self.lock:
            conns, self.conns = self.conns, []
        for c in conns:
            try:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            except OSError:
                pass
            _shut(c)
            c.close()


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
