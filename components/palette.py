"""One colour per token source (Okabe-Ito: safe for colour-vision deficiencies), for every view."""

SOURCE_COLORS = {
    "accepted": "#009E73",   # bluish green: edge draft the cloud agreed with
    "corrected": "#D55E00",  # vermillion: the cloud replaced a rejected draft
    "draft": "#0072B2",      # blue: committed without the cloud checking it
    "bonus": "#CC79A7",      # reddish purple: free extra cloud token after a fully accepted block
}
# Light tints of the same hues for token backgrounds (dark text stays readable on them).
SOURCE_TINTS = {"accepted": "#D4F0E6", "corrected": "#FBDCC6", "draft": "#D6E8F5", "bonus": "#F5DDEA"}
# "draft": the cloud never checked it (gate, or a faulty commit)
SOURCE_LABELS = {"accepted": "accepted", "corrected": "corrected", "draft": "unchecked draft", "bonus": "bonus"}
REJECTED_COLOR = "#7A7A7A"
CYCLE_COLOR = "#C0002A"
CLOUD_CALL_COLOR = "#444444"
NEUTRAL_COLOR = "#999999"
