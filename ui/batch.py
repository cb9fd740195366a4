import gradio as gr
class BatchTab:
    def __init__(self, live):
        gr.Markdown("todo")
