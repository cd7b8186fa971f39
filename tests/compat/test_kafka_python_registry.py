"""The suite's workaround for kafka-python 3.0.12's response registry
(tests/support/kafka_python_registry.py): a versioned response class that is dropped, as the
losing thread's is when two clients first ask for a version at once, no longer takes every
kafka-python client of the process down with it."""

from __future__ import annotations

import gc

from kafka.protocol.api_header import RequestHeader, ResponseClassRegistry
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

VERSION = 9


def test_a_dropped_versioned_class_leaves_the_registry_working() -> None:
    # what a thread that lost the race in ``VersionSubscriptable.__getitem__`` made
    name = f"{MetadataResponse.__name__}_v{VERSION}"
    lost = type(name, tuple(MetadataResponse.mro()), {"_class_version": VERSION}, init=False)
    del lost
    gc.collect()
    header = RequestHeader(
        request_api_key=MetadataRequest.API_KEY,
        request_api_version=VERSION,
        correlation_id=1,
        client_id="registry-check",
    )
    found = ResponseClassRegistry.get_response_class(header)
    assert found is MetadataResponse[VERSION]
