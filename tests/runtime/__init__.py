"""Runtime tests: quarantine, Delta sinks and batch runs on the shared SparkSession."""
