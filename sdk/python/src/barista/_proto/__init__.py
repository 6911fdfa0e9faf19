"""Code generated from proto/*.proto and sdk/python/proto/rpc_status.proto
by `make proto-python` (part of `make proto`): do not edit. The SDK's own
modules are the API; these messages are the wire's."""
