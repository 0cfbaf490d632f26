"""A run folder: where one judge run's reports and summary live, and the one place that knows its layout.

```
<out>/<run-id>/
    summary.json                  the run (`RunSummary`)
    records/<encoded id>.json     one `RecordReport` per record (`.r<N>.json` for repeat N > 1)
```

`RunFolder.create(out)` makes a new folder (run id: a UTC timestamp and a random suffix, unless given);
`write_report` / `write_summary` write atomically, so a reader never sees half a file and a crash of the
process loses at most the reports in flight (the summary is also flushed to disk; reports, thousands
a run, are left to the OS). `load()` reads every report back and keeps going past a bad file: each
problem is a `ReportProblem` naming the file and what failed, the good reports still load. Folders
written before `records/` existed (reports at the top, beside `summary.json`) still load.

A run id is one path segment (`validate_run_id`: no `/` or `\\`, not `.` or `..`, no control characters,
at most `MAX_RUN_ID_LENGTH` characters), so a run folder is always a direct child of `--out`. Report file
names stay distinct on case-insensitive file systems (macOS, Windows): the first id to take a name keeps
it, and an id whose name differs from a taken one only in case gets a `~<hash>` suffix (`report_path`).
A report that cannot be serialised (a pydantic serializer limit no loader check foresaw) is written as
a shortened report carrying the error, so one record can never stop the run.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

if TYPE_CHECKING:
    import pandas as pd

from sensei_eval.core.errors import ConfigError, InputError, describe_error, validation_message
from sensei_eval.core.files import write_text_atomic
from sensei_eval.core.reports import RecordReport, RunSummary, dump_summary
from sensei_eval.core.verdicts import judge_status

__all__ = (
    'MAX_RUN_ID_LENGTH',
    'RECORDS_DIR',
    'RUN_FILES',
    'SUMMARY_FILE',
    'LoadedRun',
    'ReportProblem',
    'RunFolder',
    'RunFolderError',
    'RunIdError',
    'decode_query_id',
    'encode_query_id',
    'load_reports',
    'new_run_id',
    'report_filename',
    'report_path',
    'report_paths',
    'to_dataframe',
    'validate_run_id',
)

SUMMARY_FILE = 'summary.json'
# A run id is a folder name: well under every file system's 255-byte name limit, even in UTF-8.
MAX_RUN_ID_LENGTH = 64
# What a run id may not contain: path separators, and control characters (terminals, file systems).
_RUN_ID_BAD = re.compile(r'[/\\\x00-\x1f\x7f]')
# Names Windows keeps for devices (`CON`, `nul.txt`, `COM1`): a folder of that name cannot be made there,
# and a report tree copied to Windows must still open. Also refused: a trailing dot (Windows drops it).
_RUN_ID_RESERVED = re.compile(r'^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?$', re.IGNORECASE)

RECORDS_DIR = 'records'
# Files in a run folder that are about the run, not a record's report.
RUN_FILES = frozenset({SUMMARY_FILE, 'calibration.json'})
_SAFE_CHARS = frozenset('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-')
# Names Windows reserves whatever the extension (`con.json`, `NUL.txt`, ...).
_RESERVED_NAMES = frozenset(
    {'con', 'prn', 'aux', 'nul', 'conin$', 'conout$'} | {f'{p}{n}' for p in ('com', 'lpt') for n in '123456789¹²³'}
)
# An encoded id longer than this is cut and given a hash suffix (file names are capped at 255 bytes).
_MAX_NAME = 150
_REPEAT_TAIL = re.compile(r'\.r[0-9]+$')


def _percent(c: str) -> str:
    return ''.join(f'%{b:02X}' for b in c.encode('utf-8'))


def encode_query_id(query_id: str) -> str:
    """A record id as a file-name stem that no other id, run file or repeat suffix can collide with.

    Reversible (`decode_query_id`) unless over the length cap: every character outside
    `[A-Za-z0-9._-]` is percent-encoded as UTF-8 (`/` -> `%2F`, `%` -> `%25`), and so are a leading `.`
    (`..`, hidden files), a trailing `.` (Windows drops it), the dot of a trailing `.r<N>` (that is the
    repeat suffix) and the first letter of a Windows-reserved name (`CON` -> `%43ON`). An encoded id over
    150 characters is cut and gets `~` and 12 hex digits of the id's SHA256 (`~` is always encoded, so it
    only ever marks a hash); the full id is in the report itself.
    """
    encoded = ''.join(c if c in _SAFE_CHARS else _percent(c) for c in query_id)
    if encoded.startswith('.'):
        encoded = '%2E' + encoded[1:]
    if encoded.endswith('.'):
        encoded = encoded[:-1] + '%2E'
    if (tail := _REPEAT_TAIL.search(encoded)) is not None:
        encoded = encoded[: tail.start()] + '%2E' + encoded[tail.start() + 1 :]
    if encoded.split('.', 1)[0].lower() in _RESERVED_NAMES:
        encoded = _percent(encoded[0]) + encoded[1:]
    if not encoded:
        encoded = '~empty'
    if len(encoded) > _MAX_NAME:
        cut = encoded[: _MAX_NAME - 13]
        if '%' in cut[-2:]:  # never split a %XX escape
            cut = cut[: cut.rindex('%')]
        encoded = f'{cut}~{hashlib.sha256(query_id.encode()).hexdigest()[:12]}'
    return encoded


def decode_query_id(stem: str) -> str | None:
    """The record id `encode_query_id` encoded into `stem`; None for a cut (hashed) name."""
    from urllib.parse import unquote

    if '~' in stem:
        return None
    return unquote(stem, errors='strict')


def report_filename(query_id: str, repeat: int = 1) -> str:
    """The file name of a record's report inside a run folder's `records/` (see `encode_query_id`)."""
    suffix = '' if repeat == 1 else f'.r{repeat}'
    return f'{encode_query_id(query_id)}{suffix}.json'


def report_path(run_dir: Path, query_id: str, repeat: int = 1) -> Path:
    """Where a record's report goes: `<run_dir>/records/<encoded id>[.r<N>].json`, apart from the run's files."""
    return run_dir / RECORDS_DIR / report_filename(query_id, repeat)


class RunIdError(ConfigError):
    """A `--run-id` that is not one plain path segment (see `validate_run_id`)."""


def validate_run_id(run_id: str) -> str:
    """`run_id` if it names one folder directly under `--out`; else a `RunIdError` saying what is wrong."""
    if not run_id.strip():
        raise RunIdError('--run-id: must not be empty')
    if len(run_id) > MAX_RUN_ID_LENGTH:
        raise RunIdError(f'--run-id: {len(run_id):,} characters, over the {MAX_RUN_ID_LENGTH}-character limit')
    if bad := _RUN_ID_BAD.search(run_id):
        raise RunIdError(f'--run-id: {run_id[:40]!r} contains {bad.group()!r}; use one folder name (letters, digits, . _ -)')
    if run_id in ('.', '..') or run_id != run_id.strip():
        raise RunIdError(f'--run-id: {run_id!r} is not a folder name of its own')
    if _RUN_ID_RESERVED.match(run_id) or run_id.endswith('.'):
        raise RunIdError(
            f'--run-id: {run_id!r} is a device name on Windows (CON, NUL, COM1 ...) or ends in a dot; use another name'
        )
    return run_id


def new_run_id(now: datetime | None = None) -> str:
    """A fresh run id: `YYYYmmdd-HHMMSS-xxxx` (UTC, then 4 random hex digits so two runs in one second differ)."""
    return f'{now or datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}'


class RunFolderError(InputError):
    """A run folder that cannot be read: missing, not a folder, without reports, or with bad report files."""

    def __init__(self, message: str, problems: list[ReportProblem] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


@dataclass(frozen=True)
class ReportProblem:
    """One report file that did not load: which file, and what failed."""

    path: Path
    message: str

    def __str__(self) -> str:
        return f'{self.path}: {self.message}'


@dataclass
class LoadedRun:
    """What `RunFolder.load` found: the reports that loaded and the files that did not."""

    reports: list[RecordReport] = field(default_factory=list)
    problems: list[ReportProblem] = field(default_factory=list)


class RunFolder:
    """One judge run's folder: creates it, writes its reports and summary, reads them back."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        # report file names taken in this folder, by the hash of their case-folded form (see `report_path`):
        # a set for names already in folded form (most), a dict to the exact name's hash for the others;
        # ints, not strings, so a run of millions of records keeps well under 100 bytes a name
        self._folded: set[int] | None = None
        self._mixed: dict[int, int] = {}

    def __repr__(self) -> str:
        return f'RunFolder({str(self.path)!r})'

    def __fspath__(self) -> str:
        return str(self.path)

    @classmethod
    def create(cls, out_dir: str | Path, run_id: str | None = None) -> RunFolder:
        """A new (or an existing, when `run_id` names one) run folder under `out_dir`; a bad `run_id`
        is a `RunIdError` (`validate_run_id`)."""
        folder = cls(Path(out_dir) / (validate_run_id(run_id) if run_id is not None else new_run_id()))
        folder.path.mkdir(parents=True, exist_ok=True)
        return folder

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def summary_path(self) -> Path:
        return self.path / SUMMARY_FILE

    def report_path(self, query_id: str, repeat: int = 1) -> Path:
        """Where a record's report goes: `records/<encoded id>[.r<N>].json` (see `encode_query_id`),
        or `records/<encoded id>~<hash>[.r<N>].json` when another id took that name in another case."""
        path = report_path(self.path, query_id, repeat)
        if self._folded is None:
            self._folded = set()
            records = self.path / RECORDS_DIR
            for existing in records.glob('*.json') if records.is_dir() else ():
                self._claim(existing.name)
        if self._claim(path.name):
            return path
        stem = path.name.removesuffix('.json')
        base, dot, rep = stem.rpartition('.r') if repeat != 1 else (stem, '', '')
        tagged = f'{base}~{hashlib.sha256(query_id.encode()).hexdigest()[:12]}{dot}{rep}.json'
        self._claim(tagged)
        return path.with_name(tagged)

    def _claim(self, name: str) -> bool:
        """Take `name` unless another name equal to it under case folding was taken first; whether it is ours."""
        assert self._folded is not None
        folded = name.casefold()
        key = hash(folded)
        if name == folded:
            if key in self._mixed:
                return False
            self._folded.add(key)
            return True
        if key in self._folded:
            return False
        return self._mixed.setdefault(key, hash(name)) == hash(name)

    # -- writing ---------------------------------------------------------------------------------------

    def write_report(self, report: RecordReport) -> Path:
        """Write one record's report atomically; returns its path. Not flushed to disk one by one (a
        run writes thousands: the flush would be most of its time); a crash of the process loses none."""
        path = self.report_path(report.query_id, report.repeat)
        try:
            data = report.model_dump_json(indent=2)
        except (ValueError, RecursionError) as e:  # pydantic's serializer limits: the record, not the run, fails
            data = _unserialisable(report, e).model_dump_json(indent=2)
        write_text_atomic(path, data, durable=False)
        return path

    def write_summary(self, summary: RunSummary) -> Path:
        """Write `summary.json` atomically; returns its path."""
        write_text_atomic(self.summary_path, dump_summary(summary))
        return self.summary_path

    # -- reading ---------------------------------------------------------------------------------------

    def report_paths(self) -> list[Path]:
        """The record reports, in file-name order: `records/*.json`, or, in a folder written before
        reports moved there, the top-level `*.json` that are not run files (`summary.json`, a comparison)."""
        records = self.path / RECORDS_DIR
        if records.is_dir():
            return sorted(records.glob('*.json'))
        return [
            p
            for p in sorted(self.path.glob('*.json'))
            if p.name not in RUN_FILES and p.name != 'batches.json' and not p.name.startswith('comparison')
        ]

    def check(self) -> None:
        """Raise `RunFolderError` (or `FileNotFoundError` when missing) unless the folder exists."""
        if not self.path.exists():
            raise FileNotFoundError(f'no run folder at {self.path}')
        if not self.path.is_dir():
            raise RunFolderError(f'not a folder: {self.path}')

    def load(self) -> LoadedRun:
        """Every report that loads, and a located `ReportProblem` for each file that does not."""
        loaded = LoadedRun()
        for _, item in self.iter_reports():
            if isinstance(item, ReportProblem):
                loaded.problems.append(item)
            else:
                loaded.reports.append(item)
        return loaded

    def iter_reports(self) -> Iterator[tuple[Path, RecordReport | ReportProblem]]:
        """Each report file in name order with its report, or the located problem that kept it from loading;
        one at a time, so a caller can keep only what it needs of a run of any size."""
        self.check()
        for path in self.report_paths():
            try:
                yield path, RecordReport.model_validate_json(path.read_text(encoding='utf-8'))
            except (OSError, UnicodeDecodeError) as e:
                yield path, ReportProblem(path, f'cannot read: {e}')
            except ValidationError as e:
                yield path, ReportProblem(path, validation_message(e))

    def load_reports(self, *, require: bool = False) -> list[RecordReport]:
        """Every report, in file-name order; a bad file is a `RunFolderError` listing every bad file
        (`load()` keeps the good ones instead). `require=True`: an empty folder is an error too."""
        loaded = self.load()
        if loaded.problems:
            raise RunFolderError(
                f'{len(loaded.problems)} unreadable report(s):\n  ' + '\n  '.join(map(str, loaded.problems)),
                loaded.problems,
            )
        if require and not loaded.reports:
            raise RunFolderError(f'no judge reports in {self.path} (looked for {RECORDS_DIR}/*.json, and *.json for older runs)')
        return loaded.reports

    def load_summary(self) -> RunSummary | None:
        """The run's summary; None when the folder has none. A bad summary is a located `RunFolderError`."""
        if not self.summary_path.is_file():
            return None
        try:
            return RunSummary.model_validate_json(self.summary_path.read_text(encoding='utf-8'))
        except (OSError, UnicodeDecodeError) as e:
            raise RunFolderError(f'{self.summary_path}: cannot read: {e}') from None
        except ValidationError as e:
            raise RunFolderError(f'{self.summary_path}: {validation_message(e)}') from None


def _unserialisable(report: RecordReport, e: BaseException) -> RecordReport:
    """The report without the record's content (messages, query, judges' texts), carrying why: what is
    left is ids, counts and the error, which always serialise."""
    reason = f"the report could not be written whole ({describe_error(e, limit=200)}); the record's content is left out"
    return RecordReport(
        query_id=report.query_id,
        run_id=report.run_id,
        repeat=report.repeat,
        evaluated_at=report.evaluated_at,
        query='',
        messages=[],
        model=report.model,
        errors=[*report.errors[:20], reason],
        input_tokens=report.input_tokens,
        output_tokens=report.output_tokens,
        latency_s=report.latency_s,
    )


def report_paths(run_dir: Path) -> list[Path]:
    """The record reports of a run folder, in file-name order (`RunFolder.report_paths`: both layouts)."""
    return RunFolder(run_dir).report_paths()


def load_reports(run_dir: str | Path) -> list[RecordReport]:
    """Every record report in a run folder (not the summary), in file-name order; both layouts.

    `RunFolder(run_dir).load_reports()`: a missing folder is a `FileNotFoundError`, bad report files a
    `run_folder.RunFolderError` naming each file and what failed (`RunFolder.load` keeps the good ones)."""
    return RunFolder(run_dir).load_reports()


def to_dataframe(run_dir: str | Path | Iterable[RecordReport]) -> pd.DataFrame:
    """One row per (record, repeat, judge): status, verdict (`core.verdicts`), score, issues, cost — errors,
    inconclusive and smoke answers stay rows with NaN scores."""
    import pandas as pd

    reports = load_reports(run_dir) if isinstance(run_dir, str | Path) else list(run_dir)
    rows = []
    for report in reports:
        for name, result in report.judges.items():
            verdict = judge_status(result)  # the verdict model's (`core.verdicts`)
            rows.append(
                {
                    'query_id': report.query_id,
                    'repeat': report.repeat,
                    'judge': name,
                    'failure_mode': result.failure_mode,
                    'category': result.category,
                    'status': result.status,
                    'verdict': verdict,
                    'score': result.score if verdict in ('pass', 'fail') else None,
                    'passed': True if verdict == 'pass' else False if verdict == 'fail' else None,
                    'n_issues': len(result.issues),
                    'error': result.error,
                    'criteria_hash': result.criteria_hash,
                    'model': result.model,
                    'input_tokens': result.input_tokens,
                    'output_tokens': result.output_tokens,
                    'latency_s': result.latency_s,
                    'cached': result.cached,
                    'truncated': result.truncation is not None,
                    'overall_score': report.overall_score,
                    'coverage': report.coverage.label if report.coverage is not None else None,
                    'primary_failure_mode': report.primary_failure_mode,
                    'rating_mean': report.agent_rating.mean if report.agent_rating else None,
                    'prompt_version': report.prompt_version,
                }
            )
    return pd.DataFrame(rows)
