"""Feature names as users write them, and the subsets each library trains on directly."""

# Names users write (each row a kind LightGBM, XGBoost or pandas treats specially).
NASTY = [
    "blood pressure",  # a space: LightGBM stores blood_pressure
    "a,b",  # a comma: LightGBM refuses it
    "x[1]",  # brackets: LightGBM and XGBoost refuse them
    "<y>",  # '<': XGBoost refuses it
    '"q"',  # quotes: LightGBM refuses them
    "é",  # accented letter
    "温度",  # CJK
    ":",  # a colon alone: LightGBM refuses it
    "1st",  # a leading digit
    " ",  # a name that is only a space: LightGBM stores "_"
]
# The subset LightGBM trains on directly (it stores spaces as underscores).
LIGHTGBM_OK = ["blood pressure", "<y>", "é", "温度", "1st", " ", "x=1", "tab\there", "back\\slash", "a b"]
# The subset XGBoost trains on directly (it keeps names exactly).
XGBOOST_OK = ["blood pressure", "a,b", '"q"', "é", "温度", ":", "1st", " ", "a>b", "tab\there"]
