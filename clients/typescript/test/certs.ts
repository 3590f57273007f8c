// Test support: certificates made with the openssl CLI — a CA, a server certificate for
// 127.0.0.1/localhost and a client certificate signed by it, and a second CA that signed
// neither (to be distrusted).

import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

export interface Certificates {
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A CA that signed none of the above. */
  otherCa: string;
}

function openssl(args: string[]): void {
  execFileSync("openssl", args, { stdio: ["ignore", "ignore", "pipe"] });
}

function makeCa(dir: string, name: string): { cert: string; key: string } {
  const cert = join(dir, `${name}.pem`);
  const key = join(dir, `${name}.key`);
  openssl([
    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-keyout", key, "-out", cert, "-days", "2", "-subj", `/CN=airlock test ${name}`,
    "-addext", "basicConstraints=critical,CA:TRUE",
    "-addext", "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  return { cert, key };
}

function makeLeaf(
  dir: string,
  name: string,
  ca: { cert: string; key: string },
  extensions: string,
): { cert: string; key: string } {
  const key = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const cert = join(dir, `${name}.pem`);
  const ext = join(dir, `${name}.ext`);
  writeFileSync(ext, extensions);
  openssl([
    "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-keyout", key, "-out", csr, "-subj", `/CN=airlock test ${name}`,
  ]);
  openssl([
    "x509", "-req", "-in", csr, "-CA", ca.cert, "-CAkey", ca.key, "-CAcreateserial",
    "-out", cert, "-days", "2", "-extfile", ext,
  ]);
  return { cert, key };
}

/** Writes the certificates and keys into `dir`. */
export function makeCertificates(dir: string): Certificates {
  const ca = makeCa(dir, "ca");
  const other = makeCa(dir, "other-ca");
  const server = makeLeaf(
    dir,
    "server",
    ca,
    "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n" +
      "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
  );
  const client = makeLeaf(
    dir,
    "client",
    ca,
    "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n",
  );
  return {
    ca: ca.cert,
    serverCert: server.cert,
    serverKey: server.key,
    clientCert: client.cert,
    clientKey: client.key,
    otherCa: other.cert,
  };
}
