"""The broker settings of authentication: listeners and their security protocols, SASL
mechanisms, TLS from PEM files, re-authentication (KIP-368) and the bootstrap file of
SCRAM users. Keys are Kafka's (``listeners``, ``sasl.enabled.mechanisms``,
``ssl.client.auth``, ``connections.max.reauth.ms``, ...) or librdkafka's where Kafka's
broker names a Java keystore instead (``ssl.certificate.location``, ``ssl.key.location``,
``ssl.ca.location``: PEM files). All are read once, at start (see
dataplane/security/README.md)."""

from __future__ import annotations

from dataplane.config.defs import INT_MAX, LONG_MAX, LST, B, ConfigDef, I, L, S

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

SECURITY_CONFIGS: list[ConfigDef] = [
    ConfigDef(
        "authorizer.class.name",
        S,
        "",
        "Empty: no authorization (every principal may do everything, and the ACL APIs "
        f"answer SECURITY_DISABLED, as Kafka). {STANDARD_AUTHORIZER}: every request is "
        "checked against the ACLs of the metadata log, with Kafka's semantics.",
        choices=("", STANDARD_AUTHORIZER),
        read_only=True,
    ),
    ConfigDef(
        "super.users",
        S,
        "",
        "Principals allowed everything whatever the ACLs say, separated by semicolons "
        "(User:admin;User:CN=broker,O=Example). The inter-broker principal belongs here.",
        read_only=True,
    ),
    ConfigDef(
        "allow.everyone.if.no.acl.found",
        B,
        False,
        "Allow every principal on a resource that no ACL applies to (Kafka's default, "
        "false, denies it: secured clusters grant access explicitly).",
        read_only=True,
    ),
    ConfigDef(
        "listeners",
        S,
        "",
        "The Kafka listeners as NAME://host:port,... (NAME a security protocol, or a name "
        "that listener.security.protocol.map maps to one). Empty: one PLAINTEXT listener "
        "at --listen. When set, --listen must be one of them: it is the listener other "
        "brokers and the controller reach this broker on.",
        read_only=True,
    ),
    ConfigDef(
        "listener.security.protocol.map",
        S,
        DEFAULT_PROTOCOL_MAP,
        "Listener name to security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) as "
        "NAME:PROTOCOL,... (Kafka's default maps each protocol's name to itself).",
        read_only=True,
    ),
    ConfigDef(
        "sasl.enabled.mechanisms",
        LST,
        ["SCRAM-SHA-256", "SCRAM-SHA-512"],
        "SASL mechanisms offered on SASL_PLAINTEXT and SASL_SSL listeners: PLAIN, "
        "SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default is GSSAPI, which Sluice does not "
        "offer; PLAIN sends the password itself, so it is off unless named). PLAIN checks "
        "the password against the user's stored SCRAM credential.",
        choices=SASL_MECHANISMS,
        read_only=True,
    ),
    ConfigDef(
        "ssl.certificate.location",
        S,
        "",
        "PEM file of the broker's certificate (and its chain) for SSL and SASL_SSL "
        "listeners (librdkafka's name; Kafka's broker takes a keystore).",
        read_only=True,
    ),
    ConfigDef(
        "ssl.key.location",
        S,
        "",
        "PEM file of the private key of ssl.certificate.location (unencrypted).",
        read_only=True,
    ),
    ConfigDef(
        "ssl.ca.location",
        S,
        "",
        "PEM file of the CA certificates that client certificates are checked against "
        "(needed when ssl.client.auth is requested or required).",
        read_only=True,
    ),
    ConfigDef(
        "ssl.client.auth",
        S,
        "none",
        "Client certificates on SSL listeners: none, requested (checked when sent) or "
        "required. SASL_SSL listeners ask for none (as Kafka's broker-wide setting, "
        "KIP-684). On an SSL listener the principal is User:<the certificate subject's DN> "
        "(RFC 2253, as Kafka's default mapping), User:ANONYMOUS without one.",
        choices=("none", "requested", "required"),
        read_only=True,
    ),
    ConfigDef(
        "connections.max.reauth.ms",
        L,
        0,
        "Lifetime of an authenticated SASL session (KIP-368): returned to clients in "
        "SaslAuthenticate v1+, and a connection that sends a request after it expired "
        "without re-authenticating is closed. 0: sessions never expire.",
        minimum=0,
        maximum=LONG_MAX,
        read_only=True,
    ),
    ConfigDef(
        "connection.failed.authentication.delay.ms",
        I,
        100,
        "Delay before a connection whose authentication failed is closed (after the "
        "error answer), which slows down password guessing.",
        minimum=0,
        maximum=INT_MAX,
        read_only=True,
    ),
    ConfigDef(
        "listener.allowed.principals",
        S,
        "",
        "Listeners that admit only some principals, as NAME=PRINCIPAL|PRINCIPAL;NAME=... "
        "(e.g. ENDPOINT_A=User:alice|User:CN=app,O=Example). A principal not named is "
        "refused when it has authenticated (SASL_AUTHENTICATION_FAILED, then the connection "
        "closes) or, on SSL and PLAINTEXT listeners, as it connects. Listeners not named "
        "admit everyone. Private endpoints use it (--allow-principal).",
        read_only=True,
    ),
    ConfigDef(
        "inter.broker.credentials.file",
        S,
        "",
        "File of the SASL credentials this broker authenticates with to other brokers' "
        "inter-broker listener (the one at --listen: replication, the Raft quorum, "
        'forwarding, transform outputs), JSON {"username", "password", "mechanism"} '
        "(mechanism default SCRAM-SHA-512); required when that listener is SASL_PLAINTEXT. "
        "The user is created by sasl.scram.bootstrap.users.file and named in super.users. "
        "Sluice refuses the file when other users may read it.",
        read_only=True,
    ),
    ConfigDef(
        "sasl.scram.bootstrap.users.file",
        S,
        "",
        "File of SCRAM users created when the broker starts, one per line in the syntax "
        "of kafka-storage's --add-scram: SCRAM-SHA-512=[name=alice,password=secret] "
        "(optionally iterations=N, 4096-16384). Users that already have that mechanism's "
        "credential are left as they are. The file stays off command lines and logs; "
        "Sluice refuses it when other users may read it.",
        read_only=True,
    ),
]
