"""Metering and billing (issue 16): the pure-Python core (broker types, rate cards,
units, invoices) and the PySpark pipeline that turns usage events into tables and
invoices. README.md says what each module owns."""
