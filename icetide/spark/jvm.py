"""JVM classes named in full, and the short names PySpark asks for, without py4j's
look-up by reflection.

py4j resolves ``jvm.org.apache.iceberg.spark.Spark3Util`` one dot at a time, a call to
the JVM per dot, and the JVM first tries each step as a class in each package PySpark
imports with a wildcard, every failed try searching every jar on the classpath. A short
name PySpark asks for (``jvm.functions`` for every ``pyspark.sql.functions`` call) first
fails as a class of that bare name the same way. One merge at 5M rows made 216 such
look-ups: 12% of the driver's time answering py4j calls (a JFR profile;
docs/merge-performance.md, "Where a warm merge's CPU goes"). A ``JavaClass`` made here
knows its full name: the JVM loads it directly when a member is used.
"""

from __future__ import annotations

from typing import Any

from py4j.java_gateway import JavaClass, JVMView

PYSPARK_NAMES = {
    "functions": "org.apache.spark.sql.functions",
    "PythonUtils": "org.apache.spark.api.python.PythonUtils",
    "PythonSQLUtils": "org.apache.spark.sql.api.python.PythonSQLUtils",
    "PythonRDD": "org.apache.spark.api.python.PythonRDD",
    "SparkSession": "org.apache.spark.sql.SparkSession",
    "SparkSession$": "org.apache.spark.sql.SparkSession$",
}
"""The names PySpark asks its JVM view for by their short names, with the classes they
stand for: in one merge ``functions`` 67 times, ``PythonUtils`` 21, ``SparkSession`` 6
and ``SparkSession$`` 3 (counted); ``PythonSQLUtils`` and ``PythonRDD`` are the helpers
of its Arrow and RDD paths."""


def jvm_class(name: str) -> Any:
    """The JVM class of full name ``name`` (static methods and fields, constructors),
    for the running SparkContext, with no look-up."""
    from pyspark import SparkContext

    jvm = SparkContext._jvm
    assert jvm is not None, "no active SparkContext"
    return JavaClass(name, jvm._gateway_client)


def pin_pyspark_names(jvm: JVMView) -> None:
    """Answer PySpark's short names (:data:`PYSPARK_NAMES`) from ``jvm`` itself.

    A ``JVMView`` asks the JVM only for the attributes it does not have (its
    ``__getattr__``), so each class set on it here is found in Python. A new JVM comes
    with a new view, and :func:`icetide.spark.session.build_session` pins its names
    again."""
    for short, full in PYSPARK_NAMES.items():
        setattr(jvm, short, JavaClass(full, jvm._gateway_client))
