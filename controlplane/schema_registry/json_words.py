"""Confluent's words for JSON Schema differences: which difference types are compatible
(its ``SchemaDiff.COMPATIBLE_CHANGES_STRICT``) and how each is described (its
``json/diff/Difference.java``), with READER / WRITER standing for new / old."""

from __future__ import annotations

from controlplane.schema_registry.avro import READER, WRITER

COMPATIBLE = frozenset(
    {
        "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED",
        "SCHEMA_REMOVED", "TYPE_EXTENDED",
        "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED",
        "MIN_LENGTH_REMOVED", "PATTERN_REMOVED",
        "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED",
        "EXCLUSIVE_MAXIMUM_INCREASED", "EXCLUSIVE_MAXIMUM_REMOVED",
        "EXCLUSIVE_MINIMUM_DECREASED", "EXCLUSIVE_MINIMUM_REMOVED",
        "MULTIPLE_OF_REDUCED", "MULTIPLE_OF_REMOVED",
        "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED",
        "DEPENDENCY_ARRAY_NARROWED", "DEPENDENCY_ARRAY_REMOVED", "DEPENDENCY_SCHEMA_REMOVED",
        "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_REMOVED", "MIN_PROPERTIES_DECREASED",
        "MIN_PROPERTIES_REMOVED", "ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_EXTENDED",
        "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
        "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
        "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED", "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED",
        "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED", "ADDITIONAL_ITEMS_EXTENDED",
        "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
        "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
        "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "ENUM_ARRAY_EXTENDED", "COMBINED_TYPE_EXTENDED", "PRODUCT_TYPE_NARROWED",
        "SUM_TYPE_EXTENDED", "NOT_TYPE_NARROWED",
    }
)  # fmt: skip
"""Confluent's ``SchemaDiff.COMPATIBLE_CHANGES_STRICT``."""

KEYWORD = frozenset(
    {"MAXIMUM_ADDED", "MINIMUM_ADDED", "EXCLUSIVE_MAXIMUM_ADDED", "EXCLUSIVE_MINIMUM_ADDED",
     "MULTIPLE_OF_ADDED", "MAX_LENGTH_ADDED", "MIN_LENGTH_ADDED", "PATTERN_ADDED",
     "REQUIRED_ATTRIBUTE_ADDED", "MAX_PROPERTIES_ADDED", "MIN_PROPERTIES_ADDED",
     "DEPENDENCY_ARRAY_ADDED", "DEPENDENCY_SCHEMA_ADDED", "MAX_ITEMS_ADDED", "MIN_ITEMS_ADDED",
     "UNIQUE_ITEMS_ADDED", "ADDITIONAL_ITEMS_REMOVED", "ADDITIONAL_PROPERTIES_REMOVED"}
)  # fmt: skip
INCREASED = frozenset(
    {"MIN_LENGTH_INCREASED", "MINIMUM_INCREASED", "EXCLUSIVE_MINIMUM_INCREASED",
     "MIN_PROPERTIES_INCREASED", "MULTIPLE_OF_EXPANDED", "MIN_ITEMS_INCREASED"}
)  # fmt: skip
DECREASED = frozenset(
    {"MAX_LENGTH_DECREASED", "MAXIMUM_DECREASED", "MAX_ITEMS_DECREASED",
     "EXCLUSIVE_MAXIMUM_DECREASED", "MAX_PROPERTIES_DECREASED"}
)  # fmt: skip
NARROWED = frozenset(
    {"ADDITIONAL_ITEMS_NARROWED", "ENUM_ARRAY_NARROWED", "SUM_TYPE_NARROWED",
     "ADDITIONAL_PROPERTIES_NARROWED"}
)  # fmt: skip
CHANGED_VALUE = frozenset({"PATTERN_CHANGED", "MULTIPLE_OF_CHANGED", "DEPENDENCY_ARRAY_CHANGED"})
CHANGED_TYPE = frozenset(
    {"TYPE_CHANGED", "TYPE_NARROWED", "COMBINED_TYPE_CHANGED", "COMBINED_TYPE_SUBSCHEMAS_CHANGED",
     "ENUM_ARRAY_CHANGED"}
)  # fmt: skip
EXTENDED = frozenset(
    {"DEPENDENCY_ARRAY_EXTENDED", "PRODUCT_TYPE_EXTENDED", "SUM_TYPE_EXTENDED",
     "NOT_TYPE_EXTENDED"}
)  # fmt: skip
ADDED_TO_OPEN = frozenset(
    {"REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
     "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL",
     "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"}
)  # fmt: skip


SINGLE = {
    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL": "The {r} schema has an unopen content "
    "model and has a required property at path '{p}' which is missing in the {w} schema",
    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL": "The {r} has a closed content model and is "
    "missing a property or item present at path '{p}' in the {w} schema",
    "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL": "The {r} has a closed content model and is "
    "missing a property or item present at path '{p}' in the {w} schema",
    "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": "A property or item is "
    "missing in the {r} schema but present at path '{p}' in the {w} schema and is not covered "
    "by its partially open content model",
    "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": "A property or item is missing "
    "in the {r} schema but present at path '{p}' in the {w} schema and is not covered by its "
    "partially open content model",
    "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": "The {r} schema has a "
    "property or item at path '{p}' which is missing in the {w} schema and is not covered by "
    "its partially open content model",
    "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": "The {r} schema has a property or "
    "item at path '{p}' which is missing in the {w} schema and is not covered by its partially "
    "open content model",
}
GROUPS = (
    (KEYWORD, "The keyword at path '{p}' in the {r} schema is not present in the {w} schema"),
    (INCREASED, "The value at path '{p}' in the {r} schema is more than its value in the {w} "
     "schema"),
    (DECREASED, "The value at path '{p}' in the {r} schema is less than its value in the {w} "
     "schema"),
    (CHANGED_VALUE, "The value at path '{p}' is different between the {r} and {w} schema"),
    (NARROWED, "An array or combined type at path '{p}' has fewer elements in the {r} schema "
     "than the {w} schema"),
    (EXTENDED, "An array or combined type at path '{p}' has more elements in the {r} schema "
     "than the {w} schema"),
    (CHANGED_TYPE, "A type at path '{p}' is different between the {r} schema and the {w} "
     "schema"),
    (ADDED_TO_OPEN, "The {r} schema has an open content model and has a property or item at "
     "path '{p}' which is missing in the {w} schema"),
)  # fmt: skip


def describe(kind: str, path: str) -> str:
    """Confluent's words for a difference (``json/diff/Difference.java``)."""
    template = SINGLE.get(kind, "")
    for kinds, text in GROUPS:
        if kind in kinds:
            template = text
            break
    return template.replace("{p}", path).replace("{r}", READER).replace("{w}", WRITER)
