"""The exceptions a Spark call raises: pyspark's own, and a JVM error pyspark does not
translate, which arrives as py4j's `Py4JJavaError` (there is none over Spark Connect, where
py4j may not be installed).

    >>> from pyspark.errors import AnalysisException
    >>> isinstance(AnalysisException("[TABLE_OR_VIEW_NOT_FOUND] t"), SPARK_ERRORS)
    True
"""

from __future__ import annotations

from pyspark.errors import PySparkException

try:
    from py4j.protocol import Py4JJavaError
    SPARK_ERRORS: tuple[type[Exception], ...] = (PySparkException, Py4JJavaError)
except ImportError:  # pragma: no cover
    SPARK_ERRORS = (PySparkException,)
