"""gRPC servicers: protobuf in, typed calls to the frontend/backend, protobuf out.

Errors are mapped to status codes once, by ``common.rpc``.
"""
