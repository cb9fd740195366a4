"""Real loopback servers for the cloud policy tests (stdlib only, no vLLM):

    Listener()        a TCP port that counts the connections it accepts (and closes them)
    OpenAIStub(model) a tiny OpenAI-compatible server (/v1/models, /tokenize, /v1/completions with
                      prompt logprobs, or greedy completions of max_tokens) scoring with a real
                      causal LM (the demo cloud), counting its connections; what vLLM's
                      api_server answers, in the fields the remote cloud and the audit read
"""
from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch


class Listener:
    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.accepted = 0
        self._stop = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        self.sock.settimeout(0.1)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self):
        self._stop = True
        self._thread.join()
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def get_request(self):
        req = super().get_request()
        self.stub.connections += 1
        return req


class OpenAIStub:
    def __init__(self, model, tokenizer, name: str = "demo-cloud", version: str | None = "stub"):
        self.model, self.tokenizer, self.name = model, tokenizer, name   # version: vLLM's /version
        self.connections, self.paths = 0, []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _reply(self, data, status=200):
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                stub.paths.append(self.path)
                if self.path == "/v1/models":
                    return self._reply({"data": [{"id": stub.name, "max_model_len": 4096}]})
                if self.path == "/version" and version:
                    return self._reply({"version": version})
                self._reply({"message": "no such path"}, 404)

            def do_POST(self):
                stub.paths.append(self.path)
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path == "/tokenize":
                    ids = stub.tokenizer(req["prompt"], add_special_tokens=False).input_ids
                    return self._reply({"tokens": ids})
                if self.path == "/v1/completions" and int(req.get("max_tokens") or 1) > 1:
                    return self._reply(stub.generate(req["prompt"], int(req["max_tokens"])))
                if self.path == "/v1/completions":
                    return self._reply(stub.complete(req["prompt"]))
                self._reply({"message": "no such path"}, 404)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.stub = self
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def complete(self, ids: list[int]) -> dict:
        """vLLM's answer to prompt=ids, max_tokens=1, temperature 0, prompt_logprobs=logprobs=1."""
        with self._lock, torch.no_grad():
            lp = self.model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].float().log_softmax(-1)
        plp = [None]
        for i in range(1, len(ids)):
            row, tok = lp[i - 1], ids[i]
            top = int(row.argmax())
            plp.append({str(tok): {"logprob": float(row[tok]), "rank": int((row > row[tok]).sum()) + 1},
                        str(top): {"logprob": float(row[top]), "rank": 1}})
        nxt = int(lp[-1].argmax())
        return {"choices": [{"prompt_logprobs": plp, "text": "",
                             "logprobs": {"tokens": [f"token_id:{nxt}"],
                                          "token_logprobs": [float(lp[-1][nxt])]}}]}

    def generate(self, ids: list[int], n: int) -> dict:
        """A greedy completion of n tokens with each token's top-2 log-probs, as an engine without
        speculative decoding (or its per-request metrics) answers: no `metrics` field."""
        out, top = [], []
        with self._lock, torch.no_grad():
            for _ in range(n):
                lp = self.model(input_ids=torch.tensor([ids + out]), use_cache=False).logits[0, -1]
                vals, idx = lp.float().log_softmax(-1).topk(2)
                out.append(int(idx[0]))
                top.append({f"token_id:{int(i)}": float(v) for i, v in zip(idx, vals)})
        return {"choices": [{"text": "", "finish_reason": "length",
                             "logprobs": {"tokens": [f"token_id:{t}" for t in out], "top_logprobs": top}}]}

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
