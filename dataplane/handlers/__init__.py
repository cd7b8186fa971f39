"""One module per Kafka API (see README.md); ``registry`` lists them and their versions."""
