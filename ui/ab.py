import gradio as gr
class ABTab:
    def __init__(self, live):
        gr.Markdown("todo")
