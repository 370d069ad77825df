#!/usr/bin/env python3
"""The test server's routes (testserver.py) over HTTPS, for the TLS tests.

Usage: python3 Tests/Support/tlsserver.py --cert CERT --key KEY [--client-ca CA]

Binds 127.0.0.1 on a free port and prints ``PORT <n>`` like testserver.py;
exits when stdin reaches EOF.  With --client-ca, a client certificate signed
by that CA is required (mutual TLS).
"""

import argparse
import ssl
import sys
import threading

import testserver


class TLSServer(testserver.Server):
    """Wraps each accepted connection; a failed handshake drops only that connection."""

    context: ssl.SSLContext

    def get_request(self):
        sock, address = self.socket.accept()
        return self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def finish_request(self, request, client_address):
        try:
            request.do_handshake()
        except (ssl.SSLError, OSError):
            request.close()
            return
        super().finish_request(request, client_address)


def main():
    parser = argparse.ArgumentParser(description="Hydra test server over HTTPS")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--client-ca")
    options = parser.parse_args()

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(options.cert, options.key)
    if options.client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(options.client_ca)
    server = TLSServer(("127.0.0.1", 0), testserver.Handler)
    server.context = context
    sys.stdout.write(f"PORT {server.server_address[1]}\n")
    sys.stdout.flush()
    threading.Thread(target=testserver._watch_stdin, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
