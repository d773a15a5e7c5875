"""Spark: the session privsynth counts on, its settings, and files read by the cluster.

* ``spark_session()``: the active or default SparkSession (spark-submit, a Databricks notebook), else one built
  with ``spark.master`` = ``$PRIVSYNTH_SPARK_MASTER`` (or the ``spark.master`` of the settings; default
  ``local[*]``) and the settings of ``$PRIVSYNTH_SPARK_CONF``: ``spark.KEY=VALUE`` pairs separated by
  ``;`` (a value cannot hold ``;``). The settings never touch a user's active session.
* ``spark:FORMAT:PATH`` (``parquet``, ``csv`` with a header row, ``orc``, ``json``): files or an object
  store (``s3a://...``) read BY THE CLUSTER (``session.read.format(FORMAT).load(PATH)``), registered as
  a temporary view with a generated name. The driver lists the path and plans the scan; the executors
  read the rows. This is no door into the SQL sandbox: ``spark:?query=`` still refuses file paths.

Errors name the input and the kind of fault (Spark's error condition), never a value.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any

from privsynth.errors import InputError, ParameterError
from privsynth.io.credentials import redact_url

MASTER_VARIABLE = "PRIVSYNTH_SPARK_MASTER"
CONF_VARIABLE = "PRIVSYNTH_SPARK_CONF"
CONF_SEPARATOR = ";"
FILE_FORMATS = ("parquet", "csv", "orc", "json")
DEFAULT_MASTER = "local[*]"


@dataclass(frozen=True)
class SparkFiles:
    """Files (a path, a folder, a glob or a URL) that the cluster reads in ``format``."""

    format: str
    path: str

    def describe(self) -> str:
        """A public description: the form and the path, credentials redacted."""
        return f"spark:{self.format}:{redact_url(self.path)}"


def spark_conf(text: str | None = None) -> dict[str, str]:
    """The settings of ``text`` (default ``$PRIVSYNTH_SPARK_CONF``): ``spark.KEY=VALUE;spark.KEY=VALUE``.

    Raises ParameterError naming the entry's position (a value may be a secret: never quoted).
    """
    text = os.environ.get(CONF_VARIABLE, "") if text is None else text
    settings: dict[str, str] = {}
    for position, entry in enumerate(text.split(CONF_SEPARATOR), start=1):
        if not entry.strip():
            continue
        key, equals, value = (part.strip() for part in entry.partition("="))
        if not equals or not key.startswith("spark.") or len(key) == len("spark.") or any(c.isspace() for c in key):
            raise ParameterError(f"{CONF_VARIABLE}: entry {position} is not spark.KEY=VALUE (entries are separated "
                                 f"by {CONF_SEPARATOR!r})")
        settings[key] = value
    return settings


def spark_session() -> Any:
    """The active (or default) SparkSession, or one built from $PRIVSYNTH_SPARK_MASTER and $PRIVSYNTH_SPARK_CONF."""
    settings = spark_conf()  # checked first: a bad setting is refused even where a session is active
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    try:
        return SparkSession.active()  # this thread's active session, else the process' default one
    except PySparkRuntimeError:  # NO_ACTIVE_OR_DEFAULT_SESSION
        pass
    master = os.environ.get(MASTER_VARIABLE) or settings.pop("spark.master", DEFAULT_MASTER)
    builder = SparkSession.builder.master(master).appName("privsynth")
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def spark_files(rest: str) -> SparkFiles | None:
    """The files of ``spark:FORMAT:PATH`` (``rest``: what follows ``spark:``); None for a table or a query."""
    head, colon, path = rest.partition(":")
    if not colon or not head.isidentifier():
        return None  # spark:TABLE, spark:db.table, spark:?query=...
    if head.lower() not in FILE_FORMATS:
        raise InputError(f"--input spark:{head}:...: unknown file format {head!r}; "
                         f"expected one of {list(FILE_FORMATS)}")
    if not path.strip():
        raise InputError(f"--input spark:{head}: expected spark:{head.lower()}:PATH (a path or URL the cluster reads)")
    return SparkFiles(head.lower(), path.strip())


def _condition(err: Exception) -> str:
    """Spark's error condition (PATH_NOT_FOUND, ...) or the exception's class: never its message."""
    getter = getattr(err, "getCondition", None) or getattr(err, "getErrorClass", None)
    try:
        condition = getter() if getter else None
    except Exception:  # noqa: BLE001  (a Py4J error without a condition)
        condition = None
    return str(condition or type(err).__name__)


def register_files(session: Any, files: SparkFiles) -> str:
    """Have the cluster read ``files`` into a temporary view; its generated name.

    CSV: the first row is the header, every column is text (as privsynth reads CSV), quotes double as
    in RFC 4180, and a malformed row fails the count (FAILFAST) instead of becoming missing values;
    records are lines (no line break inside a quoted field), so the cluster splits large files.
    """
    reader = session.read.format(files.format)
    if files.format == "csv":
        reader = reader.options(header="true", inferSchema="false", escape='"', mode="FAILFAST")
    try:
        frame = reader.load(files.path)
    except Exception as err:  # noqa: BLE001  (Spark's messages may quote the data: only the condition)
        raise InputError(f"input {files.describe()}: the cluster cannot read it ({_condition(err)})") from None
    name = f"privsynth_{uuid.uuid4().hex[:12]}"
    frame.createOrReplaceTempView(name)
    return name


def drop_view(session: Any, name: str) -> None:
    """Drop the temporary view ``register_files`` made."""
    session.catalog.dropTempView(name)
